"""`scrapy export-graph OUT` (see export_graph.py: why this file has a hyphen)."""

from scrapy.commands import ScrapyCommand

from crawlproj.addon import command_settings
from crawlproj.commands import export_graph as impl


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = command_settings(LOG_ENABLED=False)

    def syntax(self):
        return impl.SYNTAX

    def short_desc(self):
        return impl.DESCRIPTION

    def add_options(self, parser):
        super().add_options(parser)
        impl.add_options(parser)

    def run(self, args, opts):
        self.exitcode = impl.run(self.settings, args, opts)
