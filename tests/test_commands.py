"""How Scrapy finds crawlproj's commands: COMMANDS_MODULE names a command after
its module; the ``scrapy.commands`` entry-point group names it itself."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scrapy(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CRAWL_DATA_DIR")}
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def listed_commands(out: str) -> list[str]:
    lines = out.split("Available commands:", 1)[1].splitlines()
    return [ln.split()[0] for ln in lines if ln.startswith("  ") and ln.split()
            and not ln.strip().startswith("[")]


def test_export_graph_is_one_command_of_one_importable_module():
    [ep] = [e for e in entry_points(group="scrapy.commands") if e.name == "export-graph"]
    cls = ep.load()
    assert all(part.isidentifier() for part in cls.__module__.split("."))
    run = scrapy("-h")
    assert run.returncode == 0, run.stderr
    names = listed_commands(run.stdout)
    assert "crawl" in names and "frontier" in names  # the COMMANDS_MODULE ones
    assert [n for n in names if "export" in n] == ["export-graph"]
    usage = scrapy("export-graph", "-h")
    assert usage.returncode == 0 and "scrapy export-graph OUT" in usage.stdout


def test_export_graph_outside_the_project_says_so_and_touches_nothing(tmp_path):
    run = scrapy("export-graph", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 2
    assert "project directory" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
