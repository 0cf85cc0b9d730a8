"""``python -m crawlproj.simweb --spec JSON [--port 0] [--log FILE]``: the
server process started by testing.SimWebServer (see server.main)."""

import sys

from .server import main

main(sys.argv[1:])
