"""crawlproj under a real Scrapyd: deployed with scrapyd-deploy, run from its egg.

A Scrapyd server of the test's own (a free loopback port, its config and
directories in a temporary directory) gets the project as a user deploys it:
`scrapyd-deploy` in a clean clone of the tree. Its jobs take everything from
schedule.json, the seeds as a spider argument and REDIS_URL, CRAWL_ID,
FRONTIER_PRIORITIZER and CRAWL_PROXY as settings: the server's environment
has none of them. What was fetched is read from the simulated web's own
request log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from crawlproj.frontier.frontier import SYNC_PARTS
from crawlproj.redis.embedded import free_port
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PROJECT, VERSION = "crawlproj", "1"
# What a job must get from schedule.json, not from the server's environment.
JOB_ONLY = ("REDIS_URL", "REDIS_CLUSTER", "CRAWL_ID", "CRAWL_DATA_DIR", "SCRAPY_SETTINGS_MODULE",
            "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY")
WEB = {"seed": 11, "hosts": 40, "pages": 400, "page_bytes": 2000, "latency_ms": [2, 8]}
SEEDED, SEEDLESS = "crawlproj-test seeded", "crawlproj-test seedless"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def clean_clone(dest: Path) -> Path:
    """The tree's files as a clone of it would have them (tracked and new ones,
    nothing ignored), committed in a repository of their own."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # not a file deleted but not yet committed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "clone")
    return dest


class Scrapyd:
    """`scrapyd` in a directory of its own, on a free loopback port."""

    def __init__(self, home: Path):
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        (home / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {self.port}\n"
            f"eggs_dir = {home / 'eggs'}\n"
            f"logs_dir = {home / 'logs'}\n"
            f"dbs_dir = {home / 'dbs'}\n"
            "items_dir =\n"
            "max_proc = 4\n"
            "poll_interval = 0.5\n")
        self.env = {k: v for k, v in os.environ.items() if k not in JOB_ONLY}
        self.env["HOME"] = str(home)  # no ~/.scrapyd.conf or ~/.scrapy.cfg but these
        self._out = open(home / "scrapyd.out", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "scrapyd"], cwd=home, env=self.env,
                                     stdout=self._out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.get("daemonstatus.json")["status"] == "ok":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("scrapyd did not start:\n" + self.output())
            time.sleep(0.2)

    def get(self, endpoint: str, **params) -> dict:
        query = f"?{urlencode(params)}" if params else ""
        with urlopen(self.url + endpoint + query, timeout=30) as r:
            return json.load(r)

    def post(self, endpoint: str, form: list[tuple[str, str]]) -> dict:
        with urlopen(self.url + endpoint, data=urlencode(form).encode(), timeout=60) as r:
            return json.load(r)

    def schedule(self, job: str, settings: dict, **args) -> None:
        """schedule.json: settings as setting=NAME=VALUE, args as spider arguments."""
        answer = self.post("schedule.json", [
            ("project", PROJECT), ("spider", "web"), ("jobid", job),
            *(("setting", f"{k}={v}") for k, v in settings.items()), *args.items()])
        assert answer.get("status") == "ok", answer

    def log(self, job: str) -> str:
        path = self.home / "logs" / PROJECT / "web" / f"{job}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, job: str, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(job):
            if time.monotonic() > deadline or job in self.finished():
                raise AssertionError(f"job {job} never logged {text!r}:\n{self.log(job)[-3000:]}")
            time.sleep(0.1)

    def finished(self) -> set[str]:
        return {j["id"] for j in self.get("listjobs.json", project=PROJECT)["finished"]}

    def wait_finished(self, jobs: list[str], timeout: float = 300) -> list[str]:
        deadline = time.monotonic() + timeout
        while not set(jobs) <= self.finished():
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs did not finish; logs in {self.home / 'logs'}")
            time.sleep(0.5)
        return [self.log(job) for job in jobs]

    def output(self) -> str:
        self._out.flush()
        return (self.home / "scrapyd.out").read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:  # jobs a failed test left running
                for job in self.get("listjobs.json", project=PROJECT).get("running", []):
                    self.post("cancel.json", [("project", PROJECT), ("job", job["id"]), ("signal", "KILL")])
            except OSError:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A Scrapyd server with the project deployed by scrapyd-deploy from a
    clean clone; the clone's path."""
    top = tmp_path_factory.mktemp("scrapyd")
    clone = clean_clone(top / "clone")
    (top / "server").mkdir()
    server = Scrapyd(top / "server")
    try:
        # the server's target, outside the project, as a user keeps it
        xdg = top / "xdg"
        xdg.mkdir()
        (xdg / "scrapy.cfg").write_text(f"[deploy:here]\nurl = {server.url}\nproject = {PROJECT}\n")
        env = dict(server.env, XDG_CONFIG_HOME=str(xdg))
        run = subprocess.run([sys.executable, "-m", "scrapyd_client.deploy", "here", "-v", VERSION],
                             cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        answer = json.loads(run.stdout)
        # Scrapyd listed the spiders by running the egg: the web spider is there
        assert (answer.get("status"), answer.get("project"), answer.get("spiders")) == ("ok", PROJECT, 1), answer
        yield server, clone
    finally:
        server.stop()


def test_deploy_leaves_the_tree_clean_and_the_egg_runs_from_its_zip(deployed, tmp_path):
    server, clone = deployed
    # nothing written into the tree, not even an ignored file (build/, *.egg-info)
    assert git(clone, "status", "--porcelain", "--ignored") == ""
    egg = server.home / "eggs" / PROJECT / f"{VERSION}.egg"
    with zipfile.ZipFile(egg) as z:
        names = set(z.namelist())
        entry_points = z.read("EGG-INFO/entry_points.txt").decode()
    lua = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "crawlproj").rglob("*.lua"))
    assert lua and set(lua) <= names
    assert "[scrapy]\nsettings = settings.base" in entry_points
    # Scrapyd's runner activates the egg so for every job: the crawlproj
    # imported is the zipped one, and its Lua scripts load from the zip
    probe = (
        "import json, sys\n"
        "from scrapyd.runner import activate_egg\n"
        "activate_egg(sys.argv[1])\n"
        "import crawlproj, crawlproj.due.urlseen as due, crawlproj.frontier.frontier as frontier\n"
        "import crawlproj.stores.linkstore as links, crawlproj.stores.pagemeta as meta\n"
        "print(json.dumps({'file': crawlproj.__file__, 'lua': [due.CHECK_LUA, frontier.SYNC_LUA,\n"
        "    frontier.RESCORE_LUA, links.COMMIT_LUA, meta.PAGEMETA_LUA]}))\n")
    run = subprocess.run([sys.executable, "-c", probe, str(egg)], cwd=tmp_path, env=server.env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["file"].startswith(str(egg) + os.sep), got["file"]

    def script(package, name):
        return (ROOT / "crawlproj" / package / "lua" / f"{name}.lua").read_text(encoding="utf-8")

    seen = script("due", "seen")
    sync = "".join(script(package.split(".")[1], name.removesuffix(".lua"))
                   for package, name in SYNC_PARTS)
    assert got["lua"] == [seen + script("due", "check"), sync,
                          script("frontier", "rescore"), script("stores", "linkcommit"),
                          script("stores", "pagemeta")]


def test_two_jobs_of_one_crawl_fetch_every_page_once(deployed, redis_url, tmp_path):
    server, _ = deployed
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        crawl = {"REDIS_URL": redis_url, "CRAWL_ID": "jobs", "CRAWL_PROXY": sw.proxy_url,
                 "FRONTIER_PRIORITIZER": "backlinks", "CRAWL_DATA_DIR": tmp_path / "data",
                 "FRONTIER_DELAY_FACTOR": 2, "CONCURRENT_REQUESTS": 4, "RETRY_TIMES": 0,
                 "LOG_LEVEL": "INFO", "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0}  # the whole web
        # The job without seeds goes first, the one with them once the first
        # has opened its frontier: the first finds its crawl empty, the worst
        # case of jobs scheduled together.
        server.schedule("seedless", {**crawl, "USER_AGENT": SEEDLESS})
        server.wait_log("seedless", "Frontier opened")
        server.schedule("seeded", {**crawl, "USER_AGENT": SEEDED}, seeds=",".join(seeds))
        logs = server.wait_finished(["seedless", "seeded"])
        records = sw.settle_log()
    for log in logs:
        assert "Frontier opened: crawl 'jobs'" in log and "prioritizer BacklinkCount" in log, log[-3000:]
        assert "'finish_reason': 'finished'" in log, log[-3000:]
    counts = checks.fetch_counts(records)
    assert set(counts) == reachable, (sorted(reachable - set(counts))[:5], sorted(set(counts) - reachable)[:5])
    assert {u: n for u, n in counts.items() if n != 1} == {}
    # both jobs fetched their share, through the proxy of their settings: the
    # one without seeds waited for the crawl to have work
    fetched_by = {ua: sum(checks.fetch_counts(r for r in records if r["ua"] == ua).values())
                  for ua in (SEEDLESS, SEEDED)}
    assert all(fetched_by.values()), fetched_by
    assert "crawl 'jobs' has no work yet; waiting up to 60 s" in logs[0]
    assert "has no work yet" not in logs[1]  # it had its seeds
    # the crawl's indexer ran as a process of a job's own, importing the
    # project from the egg (crawlproj/search/process.py), and wrote the pages
    assert any(re.search(r"indexer process \d+ writes", log) for log in logs)
    egg = str(server.home / "eggs" / PROJECT / f"{VERSION}.egg")
    assert any(re.search(r"Indexer process \d+ of worker \d+ \(crawlproj from " + re.escape(egg), log)
               for log in logs)
    assert not any("Indexer process" in log and "exited with code" in log for log in logs)
    assert sum(int(n) for log in logs for n in re.findall(r"'index/written': (\d+)", log)) > 0


def test_a_worker_whose_crawl_gets_no_work_closes_after_the_wait(redis_url, tmp_path):
    with SimWebServer({"seed": 1, "hosts": 2, "pages": 4}, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers = Workers(sw, redis_url, tmp_path, [], "never", {"FRONTIER_IDLE_WAIT": 1})
        (worker,) = workers.start(1, seeds=False)
        assert workers.wait(120) == [0]
        log = workers.log(0)
        assert "crawl 'never' has no work yet; waiting up to 1 s for it" in log
        assert "no work in crawl 'never' after 1 s (FRONTIER_IDLE_WAIT)" in log
        assert "'finish_reason': 'finished'" in log
        assert sw.settle_log() == []
