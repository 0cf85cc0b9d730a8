"""crawlproj's Scrapy commands (COMMANDS_MODULE): each module here is the
command of its name. `scrapy export-graph`, whose name no module can hold, is
registered through the ``scrapy.commands`` entry point (pyproject.toml) and
lives in crawlproj/stores/graph_command.py."""
