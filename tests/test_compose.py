"""docker-compose.yml, checked against the repository without a Docker engine.

No engine runs the file here, so each thing it names is checked where it can
be: the services and their schema (image or build, healthcheck, depends_on a
healthy Valkey), the environment (every CRAWLPROJ_ name a setting, every other
name one that something reads, every ${VARIABLE} documented), the commands
(a console script the image installs, a crawlproj command whose options
parse, a spider that exists), the files (every mount source and COPY source
in the repository, none left out by .dockerignore, the checkout's local state
left out), Scrapyd's configuration, and Valkey's command line, which a real
server is started with.

Each check returns its problems; the tests at the end break a copy of the
files one way at a time and see each check report it.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata
import importlib.util
import os
import pkgutil
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import pytest
import redis
import yaml
from twisted.python.usage import UsageError

from crawlproj.addon import ENVIRONMENT_PREFIX, environment
from crawlproj.redis.client import get_redis
from crawlproj.redis.embedded import TUNING, find_server_binary, free_port

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = "docker-compose.yml"
SERVICES = {"valkey", "worker", "ranker", "seed", "scrapyd"}
# Scrapyd (>= 1.5) reads these from its environment (its docs, "Environment variables").
SCRAPYD_VARIABLES = {"SCRAPYD_BIND_ADDRESS", "SCRAPYD_HTTP_PORT", "SCRAPYD_USERNAME",
                     "SCRAPYD_PASSWORD", "SCRAPYD_UNIX_SOCKET_PATH"}
# Where Scrapyd looks for its configuration (its docs, "Configuration sources").
SCRAPYD_CONFIG = re.compile(r"^/etc/scrapyd/(scrapyd\.conf|conf\.d/[^/]+)$")
PASSWORD = "pw4compose7test"  # letters and digits, as .env.example asks


# -- reading the files -------------------------------------------------------------

def load(root: Path) -> dict:
    return yaml.safe_load((root / COMPOSE).read_text(encoding="utf-8"))


_VARIABLE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}"
                       r"|([A-Za-z_][A-Za-z0-9_]*))")


def interpolate(value, env: dict[str, str]):
    """value with ${VAR}, ${VAR:-default}, ${VAR:?error}, $VAR and $$ replaced
    as docker compose does in every string of the file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m):
        if m[1]:
            return "$"
        name = m[2] or m[5]
        op, arg = m[3], m[4] or ""
        have = env.get(name)
        if op in (":-", "-"):
            return have if have or (op == "-" and have is not None) else arg
        if op in (":?", "?"):
            if not have and not (op == "?" and have is not None):
                raise KeyError(f"{name}: {arg}")
            return have
        if op in (":+", "+"):
            return arg if have else ""
        return have or ""
    return _VARIABLE.sub(one, value)


def variables(value) -> set[str]:
    """The names of the variables docker compose would interpolate in value."""
    if isinstance(value, dict):
        return set().union(*(variables(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(variables(v) for v in value)) if value else set()
    if not isinstance(value, str):
        return set()
    return {m[2] or m[5] for m in _VARIABLE.finditer(value) if not m[1]}


def env_example(root: Path) -> dict[str, str]:
    """The variables .env.example sets, with its values."""
    out = {}
    for line in (root / ".env.example").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            out[name.strip()] = value.strip()
    return out


def filled(root: Path) -> dict:
    """The file as docker compose reads it with .env.example and a password."""
    return interpolate(load(root), {**env_example(root), "VALKEY_PASSWORD": PASSWORD})


def environment_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def argv(value) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def built_here(service: dict) -> bool:
    return "build" in service


def dockerfile_path(root: Path, service: dict) -> Path:
    build = service["build"]
    if isinstance(build, str):
        return root / build / "Dockerfile"
    return root / build.get("context", ".") / build.get("dockerfile", "Dockerfile")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    out, pending = [], ""
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def copies(dockerfile: Path) -> list[tuple[list[str], PurePosixPath, bool]]:
    """(sources, destination in the image, whether the destination is a
    folder the sources go into) of each COPY/ADD from the build context."""
    out, workdir = [], PurePosixPath("/")
    for word, rest in instructions(dockerfile):
        if word == "WORKDIR":
            workdir = workdir / rest
        elif word in ("COPY", "ADD"):
            words = shlex.split(rest)
            if any(w.startswith("--from") for w in words):
                continue  # from another stage or image, not from the context
            *sources, dest = [w for w in words if not w.startswith("--")]
            into = dest.endswith("/") or dest in (".", "..") or len(sources) > 1
            out.append((sources, workdir / dest, into))
    return out


def workdir_of(dockerfile: Path) -> PurePosixPath:
    workdir = PurePosixPath("/")
    for word, rest in instructions(dockerfile):
        if word == "WORKDIR":
            workdir = workdir / rest
    return workdir


def image_paths(dockerfile: Path, name: str) -> set[PurePosixPath]:
    """Where the file of the build context called `name` lands in the image."""
    return {dest / name if into else dest for sources, dest, into in copies(dockerfile)
            for source in sources if PurePosixPath(source).name == name}


# -- .dockerignore, as Docker reads it ---------------------------------------------

def _pattern(line: str) -> re.Pattern:
    text = line.strip().strip("/")
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(out)


def dockerignore(root: Path) -> list[tuple[bool, re.Pattern]]:
    path = root / ".dockerignore"
    rules = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                keep = line.startswith("!")
                rules.append((keep, _pattern(line.lstrip("!"))))
    return rules


def excluded(rules, path: str) -> bool:
    """Whether the build context leaves `path` out: the last rule matching it,
    or a folder above it, decides (Docker's PatternMatcher)."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out = False
    for keep, pattern in rules:
        if any(pattern.fullmatch(c) for c in candidates):
            out = not keep
    return out


# -- the checks ----------------------------------------------------------------------

def check_services(root: Path) -> list[str]:
    compose = load(root)
    services = compose.get("services") or {}
    problems = [f"no service {name}" for name in sorted(SERVICES - set(services))]
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        if "image" not in service and "build" not in service:
            problems.append(f"{name}: neither image nor build")
        if "build" not in service and str(service.get("image", "")).startswith("crawlproj"):
            problems.append(f"{name}: image {service['image']} is not built here, and no "
                            "registry has it")
        if built_here(service) and not dockerfile_path(root, service).is_file():
            problems.append(f"{name}: builds {dockerfile_path(root, service)}, which does not exist")
        for volume in service.get("volumes") or []:
            source = (volume if isinstance(volume, str) else volume["source"]).split(":")[0]
            if source.startswith((".", "/")):
                if not (root / source).exists():
                    problems.append(f"{name}: mounts {source}, which is not in the repository")
            elif source not in declared:
                problems.append(f"{name}: volume {source} is not declared under volumes")
        if name != "valkey":
            condition = (service.get("depends_on") or {})
            condition = condition.get("valkey", {}) if isinstance(condition, dict) else {}
            if (condition or {}).get("condition") != "service_healthy":
                problems.append(f"{name}: does not wait for valkey to be healthy "
                                "(depends_on: valkey: condition: service_healthy)")
    valkey = services.get("valkey") or {}
    if not re.fullmatch(r"valkey/valkey:\d[\w.-]*", str(valkey.get("image", ""))):
        problems.append(f"valkey: image {valkey.get('image')!r} is not a tagged valkey/valkey")
    test = (valkey.get("healthcheck") or {}).get("test")
    if not test or test == ["NONE"] or (valkey.get("healthcheck") or {}).get("disable"):
        problems.append("valkey: no healthcheck")
    # published on loopback unless asked: with compose's defaults and with .env.example's
    for read in (interpolate(compose, {"VALKEY_PASSWORD": PASSWORD}), filled(root)):
        for name, service in read["services"].items():
            for port in service.get("ports") or []:
                if not str(port).startswith("127.0.0.1:"):
                    problems.append(f"{name}: port {port} is published beyond this machine "
                                    "by default")
    return problems


def _read_from_environment(path: Path) -> set[str]:
    """Names a settings module reads with os.environ.get(NAME) or os.environ[NAME]."""
    text = path.read_text(encoding="utf-8")
    return set(re.findall(r"os\.environ(?:\.get\(|\[)\s*\"([A-Z_][A-Z0-9_]*)\"", text))


def check_environment(root: Path) -> list[str]:
    compose = load(root)
    problems = []
    plain = _read_from_environment(ROOT / "settings" / "base.py")
    for name, service in (compose.get("services") or {}).items():
        own = " ".join(argv((service.get("healthcheck") or {}).get("test")) + argv(service.get("command")))
        for variable, value in environment_of(service).items():
            if variable.startswith(ENVIRONMENT_PREFIX):
                if variable in environment({variable: value}):
                    problems.append(f"{name}: {variable} names no setting")
            elif variable == "SCRAPY_SETTINGS_MODULE":
                if importlib.util.find_spec(value) is None:
                    problems.append(f"{name}: SCRAPY_SETTINGS_MODULE {value} is not a module")
            elif variable.startswith("SCRAPYD_"):
                if variable not in SCRAPYD_VARIABLES or "scrapyd" not in argv(service.get("command")):
                    problems.append(f"{name}: {variable} is not a variable its Scrapyd reads")
            elif variable not in plain and f"$${variable}" not in own:
                problems.append(f"{name}: {variable} is neither a setting's variable "
                                "(settings/base.py) nor used by the service's own command")
    documented = env_example(root)
    deploy = (root / "docs" / "deploy.md").read_text(encoding="utf-8")
    for variable in sorted(variables(compose)):
        if variable not in documented:
            problems.append(f"${{{variable}}} is not in .env.example")
        if variable not in deploy:
            problems.append(f"${{{variable}}} is not in docs/deploy.md")
    return problems


def _project_settings():
    from scrapy.settings import Settings
    settings = Settings()
    settings.setmodule("settings.base", priority="project")
    return settings


def scrapyd_options():
    """The parser of scrapyd's command line: twistd's options, less the two
    Scrapyd sets itself (scrapyd/__main__.py); Scrapyd's own when installed."""
    if importlib.util.find_spec("scrapyd") is not None:
        from scrapyd.__main__ import ServerOptions
        return ServerOptions()
    from twisted.scripts.twistd import ServerOptions

    options = ServerOptions()
    options.longOpt = [o for o in options.longOpt if o not in ("python=", "rundir=")]
    return options


def check_commands(root: Path) -> list[str]:
    from scrapy.cmdline import _get_commands_dict
    from scrapy.commands import ScrapyHelpFormatter
    from scrapy.spiderloader import SpiderLoader

    compose = filled(root)
    problems = []
    settings = _project_settings()
    commands = _get_commands_dict(settings, inproject=True)
    spiders = SpiderLoader.from_settings(settings).list()
    scripts = {ep.name for ep in importlib.metadata.distribution("scrapy").entry_points
               if ep.group == "console_scripts"}
    requires = [r.split(";")[0] for r in importlib.metadata.requires("crawlproj") or []]
    for name, service in compose["services"].items():
        if not built_here(service):
            continue
        words = argv(service.get("entrypoint")) + argv(service.get("command"))
        installed = " ".join(a for w, a in instructions(dockerfile_path(root, service)) if w == "RUN")
        if not words:
            problems.append(f"{name}: runs the image's default command")
            continue
        program, args = words[0], words[1:]
        if program == "scrapy":
            if "scrapy" not in scripts or not any(re.match(r"scrapy\b(?!-)", r) for r in requires):
                problems.append(f"{name}: scrapy is not a console script crawlproj installs")
            if not args or args[0] not in commands:
                problems.append(f"{name}: scrapy {args[0] if args else ''} is not a command")
                continue
            command = commands[args[0]]
            command.settings = settings
            parser = argparse.ArgumentParser(  # as scrapy.cmdline.execute builds it
                prog=f"scrapy {args[0]}", formatter_class=ScrapyHelpFormatter,
                conflict_handler="resolve", exit_on_error=False)
            command.add_options(parser)
            try:
                opts, rest = parser.parse_known_args(args[1:])
            except (argparse.ArgumentError, SystemExit) as exc:
                problems.append(f"{name}: {' '.join(words)}: {exc}")
                continue
            unknown = [a for a in rest if a.startswith("-")]
            if unknown:
                problems.append(f"{name}: {' '.join(words)}: unknown option(s) {unknown}")
            if args[0] == "crawl" and (not rest or rest[0] not in spiders):
                problems.append(f"{name}: no spider {rest[0] if rest else ''!r} "
                                f"(spiders: {', '.join(spiders)})")
        elif program == "scrapyd":
            if not re.search(r"pip install[^&;]*[\"' ]scrapyd\b", installed):
                problems.append(f"{name}: the image does not install scrapyd")
            try:
                scrapyd_options().parseOptions(args)
            except UsageError as exc:
                problems.append(f"{name}: scrapyd {' '.join(args)}: {exc} (Scrapyd's own options "
                                "come from its configuration file and SCRAPYD_* variables)")
        else:
            problems.append(f"{name}: {program} is not a program the image installs")
    return problems


def check_image(root: Path) -> list[str]:
    compose = load(root)
    problems = []
    rules = dockerignore(root)
    for keep_out in (".venv/bin/python", ".git/HEAD", "crawlproj/__pycache__/x.pyc",
                     ".crawlproj/redis/appendonly.aof", ".env"):
        if not excluded(rules, keep_out):
            problems.append(f".dockerignore lets {keep_out} into the build context")
    # what `pip install .` reads: pyproject.toml, its readme, the packages it finds
    # (tomllib is Python 3.11+; the project runs on 3.10)
    project = (root / "pyproject.toml").read_text(encoding="utf-8")
    readme = re.search(r'^readme = "([^"]+)"', project, re.M)[1]
    find = re.search(r"\[tool\.setuptools\.packages\.find\]\s*include = \[([^]]*)\]", project)[1]
    needed = {"pyproject.toml", readme} | {p.strip('"* ') for p in find.split(",") if p.strip()}
    for dockerfile in sorted({dockerfile_path(root, s) for s in compose["services"].values()
                              if built_here(s)}):
        if not dockerfile.is_file():
            continue  # check_services says so
        copied = set()
        for sources, _, _ in copies(dockerfile):
            for source in sources:
                path = root / source
                copied.add(PurePosixPath(source).parts[0])
                if not path.exists():
                    problems.append(f"{dockerfile.name}: COPY {source}: not in the repository")
                    continue
                files = [path] if path.is_file() else [
                    f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
                for f in files:
                    rel = f.relative_to(root).as_posix()
                    if excluded(rules, rel):
                        problems.append(f"{dockerfile.name}: COPY {source}: .dockerignore "
                                        f"leaves {rel} out of the build context")
                        break
        for missing in sorted(needed - copied):
            problems.append(f"{dockerfile.name}: `pip install .` needs {missing}, not copied")
        if not any(w == "RUN" and re.search(r"pip install\b.*\s\.(\s|$)", a)
                   for w, a in instructions(dockerfile)):
            problems.append(f"{dockerfile.name}: does not install the project (pip install .)")
    return problems


def check_scrapyd(root: Path) -> list[str]:
    compose = filled(root)
    service = compose["services"]["scrapyd"]
    dockerfile = dockerfile_path(root, service)
    problems = []
    configs = [(sources[0], dest) for sources, dest, into in copies(dockerfile)
               if SCRAPYD_CONFIG.match(str(dest)) and not into]
    configs += [(v.split(":")[0], PurePosixPath(v.split(":")[1]))
                for v in service.get("volumes") or [] if isinstance(v, str) and v.count(":") >= 1
                and SCRAPYD_CONFIG.match(v.split(":")[1])]
    if not configs:
        return ["scrapyd: no configuration file where Scrapyd reads one (/etc/scrapyd/...)"]
    deploy = configparser.ConfigParser()
    deploy.read(root / "scrapy.cfg")
    name = deploy.get("deploy", "project")
    for source, _ in configs:
        conf = configparser.ConfigParser()
        conf.read(root / source)
        projects = dict(conf.items("settings")) if conf.has_section("settings") else {}
        if list(projects) != [name]:
            problems.append(f"{source}: [settings] lists {sorted(projects)}, not the project "
                            f"{name!r} of scrapy.cfg's [deploy]")
        for module in projects.values():
            if importlib.util.find_spec(module) is None:
                problems.append(f"{source}: [settings] {module} is not a module")
    # Scrapyd also reads the closest scrapy.cfg up from its working directory,
    # whose [settings] default would list the project as "default".
    workdir = PurePosixPath(service.get("working_dir") or workdir_of(dockerfile))
    for cfg in image_paths(dockerfile, "scrapy.cfg"):
        if cfg.parent in (workdir, *workdir.parents):
            problems.append(f"scrapyd: runs in {workdir}, under {cfg}: the project "
                            "would be listed as 'default'")
    env = environment_of(service)
    if env.get("SCRAPYD_BIND_ADDRESS") not in ("0.0.0.0", "::", "::0"):
        problems.append("scrapyd: listens on loopback inside its container "
                        "(SCRAPYD_BIND_ADDRESS), which its published port cannot reach")
    return problems


def check_valkey(root: Path, tmp_path: Path) -> list[str]:
    """Start a real server with the service's command line (its program
    replaced by this machine's, on a free loopback port) and check what the
    crawl relies on: the password asked, the embedded server's configuration,
    and the workers' REDIS_URL and the healthcheck's password agreeing with it."""
    compose = filled(root)
    valkey = compose["services"]["valkey"]
    words = argv(valkey.get("command"))
    if not words or words[0] != "valkey-server":
        return [f"valkey: runs {words[:1]}, not valkey-server"]
    port = free_port()
    directory = tmp_path / "valkey"
    directory.mkdir()
    proc = subprocess.Popen([find_server_binary(), *words[1:], "--port", str(port),
                             "--bind", "127.0.0.1", "--dir", str(directory),
                             "--daemonize", "no"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    problems = []
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                return [f"valkey: the server refused its command line: "
                        f"{proc.stdout.read().decode(errors='replace').strip()[-300:]}"]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    return ["valkey: the server did not start"]
                time.sleep(0.05)
        client = redis.Redis(port=port, decode_responses=True)
        try:
            client.ping()
            problems.append("valkey: answers without a password")
        except redis.AuthenticationError:
            client = redis.Redis(port=port, password=PASSWORD, decode_responses=True)
            try:
                client.ping()
            except redis.RedisError:
                return ["valkey: does not take the password VALKEY_PASSWORD"]
        config = client.config_get("*")
        wanted = {**TUNING, "appendonly": "yes", "appendfsync": "everysec", "save": ""}
        for key, value in wanted.items():
            if config.get(key) != value:
                problems.append(f"valkey: {key} is {config.get(key)!r}, not {value!r} as the "
                                "embedded server's (crawlproj/redis/embedded.py)")
        for name, service in compose["services"].items():
            url = environment_of(service).get("REDIS_URL")
            if url:
                url = re.sub(r"@valkey:6379/", f"@127.0.0.1:{port}/", url)
                try:
                    get_redis({"REDIS_URL": url})
                except Exception as exc:
                    problems.append(f"{name}: REDIS_URL does not reach the server: {exc}")
        check = " ".join(argv((valkey.get("healthcheck") or {}).get("test")))
        secret = environment_of(valkey).get("VALKEY_PASSWORD")
        if "valkey-cli" not in check or "$VALKEY_PASSWORD" not in check or secret != PASSWORD:
            problems.append("valkey: the healthcheck does not ping with the server's password")
    finally:
        proc.kill()
        proc.wait()
    return problems


# -- the repository's files pass -----------------------------------------------------

@pytest.mark.parametrize("check", [check_services, check_environment, check_commands,
                                   check_image, check_scrapyd])
def test_the_compose_file_and_what_it_names_agree(check):
    assert check(ROOT) == []


def test_valkey_starts_with_the_compose_command_line(tmp_path):
    assert check_valkey(ROOT, tmp_path) == []


def test_a_missing_password_stops_compose_before_anything_starts():
    """${VALKEY_PASSWORD:?...}: docker compose refuses the file without it,
    instead of starting a server without a password."""
    with pytest.raises(KeyError, match="VALKEY_PASSWORD: set VALKEY_PASSWORD in .env"):
        interpolate(load(ROOT), {k: v for k, v in env_example(ROOT).items()
                                 if k != "VALKEY_PASSWORD"})


def test_the_workers_environment_gives_the_settings_it_means(tmp_path):
    """The worker's environment, as the container has it, through the settings
    a crawlproj command runs with (`scrapy settings`): the profile, the plain
    variables and the CRAWLPROJ_ ones all arrive."""
    service = filled(ROOT)["services"]["worker"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENVIRONMENT_PREFIX)
           and k not in ("REDIS_URL", "CRAWL_ID", "CRAWL_DATA_DIR", "SCRAPY_SETTINGS_MODULE")}
    env.update(environment_of(service))
    env["CRAWLPROJ_FRONTIER_PRIORITIZER"] = "pagerank"  # PRIORITIZER=pagerank in .env
    got = {}
    for name in ("FRONTIER_PRIORITIZER", "RANKER_ENABLED", "REDIS_URL", "REDIS_URL_REQUIRED"):
        run = subprocess.run([sys.executable, "-m", "scrapy", "settings", "--get", name],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        got[name] = run.stdout.strip()
    assert got == {"FRONTIER_PRIORITIZER": "pagerank", "RANKER_ENABLED": "false",
                   "REDIS_URL": f"redis://:{PASSWORD}@valkey:6379/0", "REDIS_URL_REQUIRED": "True"}


def test_scrapyd_lists_the_project_under_its_name(tmp_path, monkeypatch):
    """Scrapyd's own reading of its configuration: in the service's working
    directory (no scrapy.cfg above it) the project is crawlproj; in a
    checkout, scrapy.cfg's [settings] adds a "default" project."""
    from scrapyd.config import Config
    from scrapyd.utils import get_project_list

    conf = tmp_path / "scrapyd.conf"
    text = (ROOT / "docker" / "scrapyd.conf").read_text(encoding="utf-8")
    conf.write_text(text.replace("/var/lib/scrapyd", str(tmp_path)))
    monkeypatch.chdir(tmp_path)
    assert get_project_list(Config(extra_sources=[conf])) == ["crawlproj"]
    monkeypatch.chdir(ROOT)
    assert "default" in get_project_list(Config(extra_sources=[conf]))


# -- each check fails on a broken copy -------------------------------------------------

BROKEN = [
    # (file, text, replacement, check, what the check must say)
    (COMPOSE, "  build: .\n", "", check_services, "worker: image crawlproj:local is not built here"),
    (COMPOSE, "  build: .\n  image: crawlproj:local\n", "", check_services,
     "worker: neither image nor build"),
    (COMPOSE, "      condition: service_healthy", "      condition: service_started",
     check_services, "does not wait for valkey to be healthy"),
    (COMPOSE, "    healthcheck:\n", "    x-healthcheck:\n", check_services, "valkey: no healthcheck"),
    (COMPOSE, "- ./seeds:/seeds:ro", "- ./seedz:/seeds:ro", check_services,
     "mounts ./seedz, which is not in the repository"),
    (COMPOSE, "- crawl-data:/data\n", "- crawl-dta:/data\n", check_services,
     "volume crawl-dta is not declared"),
    (COMPOSE, "${VALKEY_PUBLISH:-127.0.0.1}:6379", "${VALKEY_PUBLISH:-0.0.0.0}:6379",
     check_services, "published beyond this machine"),
    (COMPOSE, "CRAWLPROJ_FRONTIER_PRIORITIZER:", "CRAWLPROJ_FRONTIER_PRIORITISER:",
     check_environment, "CRAWLPROJ_FRONTIER_PRIORITISER names no setting"),
    (COMPOSE, "CRAWLPROJ_FRONTIER_PRIORITIZER:", "FRONTIER_PRIORITIZER:", check_environment,
     "FRONTIER_PRIORITIZER is neither a setting's variable"),
    (COMPOSE, "${WORKERS:-2}", "${WORKER_COUNT:-2}", check_environment,
     "${WORKER_COUNT} is not in .env.example"),
    (COMPOSE, "SCRAPY_SETTINGS_MODULE: settings.cluster", "SCRAPY_SETTINGS_MODULE: settings.clustr",
     check_environment, "settings.clustr is not a module"),
    (COMPOSE, '["scrapy", "crawl", "web"]', '["scrapy", "crawl", "webb"]', check_commands,
     "no spider 'webb'"),
    (COMPOSE, '["scrapy", "rank"]', '["scrapy", "rank", "--every", "5"]', check_commands,
     "unknown option(s) ['--every']"),
    (COMPOSE, '["scrapy", "rank"]', '["scrapy", "ranker"]', check_commands,
     "scrapy ranker is not a command"),
    (COMPOSE, '["scrapyd", "--pidfile="]', '["scrapyd", "--bind", "0.0.0.0"]', check_commands,
     "option --bind not recognized"),
    (COMPOSE, '["scrapy", "crawl", "web"]', '["crawl", "web"]', check_commands,
     "crawl is not a program the image installs"),
    ("Dockerfile", '"scrapyd>=1.6,<1.7"', '"scrapy-redis"', check_commands,
     "the image does not install scrapyd"),
    ("Dockerfile", "COPY middlewares ./middlewares", "COPY middleware ./middlewares", check_image,
     "COPY middleware: not in the repository"),
    ("Dockerfile", "COPY settings ./settings\n", "", check_image,
     "`pip install .` needs settings, not copied"),
    (".dockerignore", "**/.venv\n", "", check_image, ".dockerignore lets .venv/bin/python"),
    (".dockerignore", "bench/out\n", "bench/out\nsettings/base.py\n", check_image,
     "leaves settings/base.py out of the build context"),
    (COMPOSE, "    working_dir: /var/lib/scrapyd\n", "", check_scrapyd,
     "the project would be listed as 'default'"),
    ("docker/scrapyd.conf", "crawlproj = settings.cluster", "default = settings.cluster",
     check_scrapyd, "lists ['default'], not the project 'crawlproj'"),
    (COMPOSE, "SCRAPYD_BIND_ADDRESS: 0.0.0.0", "SCRAPYD_BIND_ADDRESS: 127.0.0.1", check_scrapyd,
     "listens on loopback inside its container"),
    (COMPOSE, "      - --appendonly\n", "      - --append-only\n", check_valkey,
     "the server refused its command line"),
    (COMPOSE, "      - --set-max-intset-entries\n      - \"4096\"\n", "", check_valkey,
     "set-max-intset-entries is '512', not '4096'"),
    (COMPOSE, "redis://:${VALKEY_PASSWORD", "redis://${VALKEY_PASSWORD", check_valkey,
     "REDIS_URL does not reach the server"),
    (COMPOSE, "      - --requirepass\n      - ${VALKEY_PASSWORD:?set VALKEY_PASSWORD in .env "
              "(see .env.example)}\n", "", check_valkey, "valkey: answers without a password"),
    (COMPOSE, 'REDISCLI_AUTH=\\"$$VALKEY_PASSWORD\\" valkey-cli ping', "valkey-cli ping",
     check_valkey, "the healthcheck does not ping with the server's password"),
]


def broken_copy(tmp_path: Path, file: str, text: str, replacement: str) -> Path:
    """The repository's top level linked into tmp_path, `file` a copy with
    `text` replaced."""
    root = tmp_path / "repo"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != file.split("/")[0]:
            (root / entry.name).symlink_to(entry)
    source = ROOT / file
    if "/" in file:  # a file in a folder: copy the folder, links inside
        folder = root / file.split("/")[0]
        folder.mkdir()
        for entry in (ROOT / file.split("/")[0]).iterdir():
            if entry.name != source.name:
                (folder / entry.name).symlink_to(entry)
    original = source.read_text(encoding="utf-8")
    assert text in original, f"{file} no longer has {text!r}: update this case"
    (root / file).write_text(original.replace(text, replacement, 1), encoding="utf-8")
    return root


@pytest.mark.parametrize("file, text, replacement, check, said", BROKEN,
                         ids=[f"{c.__name__}:{t.strip()[:40]}" for _, t, _, c, _ in BROKEN])
def test_each_check_fails_on_a_broken_copy(tmp_path, file, text, replacement, check, said):
    root = broken_copy(tmp_path, file, text, replacement)
    problems = check(root, tmp_path) if check is check_valkey else check(root)
    assert any(said in p for p in problems), problems


def test_the_ignore_rules_read_as_docker_reads_them():
    rules = [(False, _pattern("**/__pycache__")), (False, _pattern("docs")),
             (True, _pattern("!docs/deploy.md".lstrip("!"))), (False, _pattern("/build/"))]
    assert excluded(rules, "a/b/__pycache__/x.pyc") and excluded(rules, "__pycache__/x")
    assert excluded(rules, "docs/frontier.md") and not excluded(rules, "docs/deploy.md")
    assert excluded(rules, "build/lib/x.py") and not excluded(rules, "src/build/x.py")
    assert not excluded(rules, "crawlproj/frontier/sync.py")


def test_interpolation_reads_as_compose_reads_it():
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("${SET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d} $$SET $SET", env) == "v d  d $SET v"
    assert interpolate("${SET:+yes}${UNSET:+no}", env) == "yes"
    with pytest.raises(KeyError, match="EMPTY: say"):
        interpolate("${EMPTY:?say}", env)
    assert variables(["${A:-x}", {"k": "$B $$C"}]) == {"A", "B"}


def test_scrapyd_config_names_only_known_options():
    """Scrapyd ignores an option it does not know; a misspelt one is silently
    a default. Checked against the options of Scrapyd's own default file when
    Scrapyd is installed, else against the ones this project uses."""
    conf = configparser.ConfigParser()
    conf.read(ROOT / "docker" / "scrapyd.conf")
    if importlib.util.find_spec("scrapyd") is not None:
        defaults = configparser.ConfigParser()
        defaults.read_string(pkgutil.get_data("scrapyd", "default_scrapyd.conf").decode())
        known = set(defaults["scrapyd"])
    else:
        known = {"http_port", "bind_address", "eggs_dir", "logs_dir", "dbs_dir", "jobs_to_keep",
                 "max_proc", "max_proc_per_cpu", "items_dir", "username", "password"}
    assert set(conf["scrapyd"]) <= known


def test_docs_deploy_md_names_every_service_and_this_test():
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert "tests/test_compose.py" in text
    assert [s for s in sorted(SERVICES) if f"`{s}`" not in text] == []
