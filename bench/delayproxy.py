"""A TCP proxy that delays every byte by a fixed time each way.

Workers far from their Redis server (another machine, another rack) pay a
round trip on every call; this puts that latency between a worker and a
server on one machine, so the benchmarks can measure what it costs
(crawl_bench.py --redis-delay-ms). Bytes keep their order; each chunk read
is written on at its arrival time plus the delay, so the delay adds to the
round trip without limiting the bandwidth (a pipeline's commands all arrive
one delay later, as on a long link).

    .venv/bin/python bench/delayproxy.py --listen 127.0.0.1:7001 \
        --to 127.0.0.1:6379 --delay-ms 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                break
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(1 << 16):
            queue.put_nowait((loop.time() + delay, data))
    except OSError:
        pass
    queue.put_nowait((loop.time() + delay, None))
    with contextlib.suppress(OSError):
        await sender


async def serve(listen: tuple[str, int], to: tuple[str, int], delay: float) -> None:
    async def handle(client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection(*to)
        except OSError:
            client_w.close()
            return
        for sock in (client_w, server_w):
            raw = sock.get_extra_info("socket")
            if raw is not None:
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pump(client_r, server_w, delay), pump(server_r, client_w, delay))

    server = await asyncio.start_server(handle, *listen)
    print(f"delaying {delay * 1000:g} ms each way: {listen[0]}:{listen[1]} -> {to[0]}:{to[1]}",
          flush=True)
    async with server:
        await server.serve_forever()


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if host not in ("127.0.0.1", "::1", "localhost") or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a loopback host:port")
    return host, int(port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=address, required=True)
    ap.add_argument("--to", type=address, required=True)
    ap.add_argument("--delay-ms", type=float, required=True)
    a = ap.parse_args()
    if not a.delay_ms >= 0:
        sys.exit("delayproxy: --delay-ms must be >= 0")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(a.listen, a.to, a.delay_ms / 1000.0))


if __name__ == "__main__":
    main()
