"""A simulated multi-host web, served on loopback as an HTTP forward proxy.

See docs/simweb.md.  Main entry points:

* ``SimWeb.generate(seed=..., hosts=..., pages=..., **options)`` and
  ``SimWeb.from_graph(path, ...)`` / ``SimWeb.from_spec(spec)``: the model.
* ``testing.SimWebServer(spec)``: the server in a child process.
* ``server.read_log`` and ``checks``: what the crawler did, and was it polite.
"""

from .model import GENERATE_DEFAULTS, SimWeb, from_spec
from .server import read_log

__all__ = ["SimWeb", "from_spec", "read_log", "GENERATE_DEFAULTS", "SimWebServer"]


def __getattr__(name: str):
    # testing pulls in subprocess machinery; import it only when asked.
    if name == "SimWebServer":
        from .testing import SimWebServer

        return SimWebServer
    raise AttributeError(name)
