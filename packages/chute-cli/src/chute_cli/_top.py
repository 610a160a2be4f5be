"""`chute top`: a running pipeline's stages, rates, waits and workers, refreshed in place.

It reads the metrics endpoint of a training process (`chute.metrics.serve(port)` or
`CHUTE_METRICS_PORT=port`) every `--interval` seconds and shows what changed since the
last reading (see `_live_view`); `--once` prints one view and exits. `chute bench
--live` shows the same view of the pipeline it measures (`watch`).
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import chute

from ._common import EXIT_OK, data_error, help_epilog, usage_error
from ._live_refresh import Refresher
from ._live_view import Reading, rates, read_text, render, rich_module

__all__ = ["View", "add_top_parser", "endpoint_url", "live_while", "run_top", "watch"]

T = TypeVar("T")

DEFAULT_PORT = 9464

_DESCRIPTION = """\
Watch a running pipeline: per stage, elements per second, own time per element and
share of the time (of N x wall time for stages on N worker processes); per pipeline,
the share of wall time the training loop waited for input (next() blocking), the
bottleneck, and the workers alive. The training process serves its metrics with
chute.metrics.serve(PORT) or the environment variable CHUTE_METRICS_PORT=PORT."""


def add_top_parser(commands: Any) -> argparse.ArgumentParser:
    """Adds `top` to the subcommands `commands` of the `chute` parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="chute")
        >>> _ = add_top_parser(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["top", "9464", "--interval", "0.5"]).interval
        0.5
    """
    parser: argparse.ArgumentParser = commands.add_parser(
        "top",
        help="watch a running pipeline live: rates, waits, bottleneck, workers",
        description=_DESCRIPTION,
        epilog=help_epilog(
            "CHUTE_METRICS_PORT=9464 python train.py &   # then:",
            "chute top",
            "chute top gpu-host-3:9464 --interval 2",
            "chute top http://127.0.0.1:9464/metrics --once",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "endpoint",
        nargs="?",
        default=str(DEFAULT_PORT),
        metavar="ENDPOINT",
        help=f"a port, HOST:PORT or a URL of the metrics ({DEFAULT_PORT}: this machine)",
    )
    parser.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between readings (1)"
    )
    parser.add_argument(
        "--once", action="store_true", help="print one view (two readings S apart) and exit"
    )
    return parser


def endpoint_url(endpoint: str) -> str:
    """The metrics URL an `ENDPOINT` argument names.

    Example:
        >>> endpoint_url("9464"), endpoint_url("host:9000")
        ('http://127.0.0.1:9464/metrics', 'http://host:9000/metrics')
        >>> endpoint_url("http://host:9000")
        'http://host:9000/metrics'
    """
    text = endpoint.strip()
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if "://" not in text:
        text = f"http://{text}"
    scheme, _, rest = text.partition("://")
    if scheme not in ("http", "https") or not rest:
        usage_error(f"expected a port, HOST:PORT or an http(s) URL, got {endpoint!r}")
    if "/" not in rest:
        text += "/metrics"
    return text


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())


def run_top(args: argparse.Namespace) -> int:
    """`chute top`: reads the endpoint until Ctrl-C (or once, with `--once`)."""
    if not args.interval > 0:
        usage_error(f"--interval must be positive, got {args.interval}")
    url = endpoint_url(args.endpoint)
    rich_module("live")  # A clear error now if the extra is missing.
    if args.once:
        try:
            before = read_text(_fetch(url))
            time.sleep(args.interval)
            now = read_text(_fetch(url))
        except (urllib.error.URLError, OSError) as error:
            data_error(f"cannot read metrics from {url}: {getattr(error, 'reason', error)}")
        rich_module("console").Console().print(render(url, rates(before, now), before, now))
        return EXIT_OK
    try:
        watch(lambda: _fetch(url), url, args.interval, threading.Event())
    except KeyboardInterrupt:
        pass
    return EXIT_OK


class View:
    """Frames of the live view: each reading shown against the one before it."""

    def __init__(self, read: Callable[[], str], source: str) -> None:
        self._read, self._source = read, source
        self._before: Reading | None = None

    def frame(self) -> Any:
        """Reads once more and lays out what changed since the last reading."""
        text_module = rich_module("text")
        try:
            now = read_text(self._read())
        except (urllib.error.URLError, OSError) as error:
            self._before = None
            reason = getattr(error, "reason", error)
            return text_module.Text(f"chute top  {self._source}  waiting: {reason}")
        before, self._before = self._before, now
        if before is None:
            return text_module.Text(f"chute top  {self._source}  reading...")
        return render(self._source, rates(before, now), before, now)


def watch(
    read: Callable[[], str],
    source: str,
    interval: float,
    stop: threading.Event,
    console: Any = None,
) -> None:
    """Shows the live view of what `read()` returns, refreshed every `interval` s.

    Runs until `stop` is set (or Ctrl-C). A reading that fails (the training process
    restarting, say) is shown as such, and the view goes on when it answers again.
    """
    view = View(read, source)
    with rich_module("live").Live(console=console, auto_refresh=False) as live:
        while not stop.is_set():
            live.update(view.frame(), refresh=True)
            stop.wait(interval)


def live_while(run: Callable[[], T], interval: float = 0.5) -> T:
    """`run()`, with metrics on and their live view shown until it returns.

    The view reads this process's metrics (`chute.metrics.prometheus_text`); its
    thread steps aside while chute forks worker processes (`Refresher`).
    """
    was_on = chute.metrics.enabled()
    chute.metrics.enable()
    view = View(chute.metrics.prometheus_text, "chute bench --live")
    try:
        with rich_module("live").Live(auto_refresh=False) as live:
            refresher = Refresher(lambda: live.update(view.frame(), refresh=True), interval)
            try:
                result = run()
            finally:
                refresher.close()
                live.update(view.frame(), refresh=True)
        print()  # The report starts below the last frame.
        return result
    finally:
        if not was_on:
            chute.metrics.disable()
