"""``llm-connect view``: every judgment of a calibration run in one page (written, or served locally)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._textsafe import safe_text
from ._common import UsageError

_VIEW_HELP = """\
Show every judgment of a calibration run: one row per item with the prompt,
the reference, the candidate, each judge's score and status and the human
labels; filters by judge, status, disagreement with people and bias probe;
sorting by disagreement; and per item the exact prompt each judge saw and its
raw reply. OUT_DIR is the --out directory of 'llm-connect calibrate' or
'llm-connect demo', which write judgments.jsonl there.

The page is one self-contained HTML file (no network; every text escaped).
By default it is written to OUT_DIR/viewer.html; --serve serves it on
127.0.0.1 instead (only this page) until Ctrl-C, at a URL holding a random
token (printed; a request without it, or naming another host, gets 403).
"""

DEFAULT_PORT = 8765


def _add_view(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "view",
        help="every judgment of a calibrate or demo run in one page (written or served)",
        description=_VIEW_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out_dir", metavar="OUT_DIR", help="the --out directory of calibrate or demo")
    p.add_argument("--out", metavar="FILE", help="where to write the page (default: OUT_DIR/viewer.html)")
    p.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1 instead of writing it")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, metavar="N",
        help=f"port for --serve (default: {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.set_defaults(func=_run_view, _parser=p)


def _page(out_dir: Path) -> str:
    from ..views.judgments import JUDGMENTS_FILE, read_judgments
    from ..views.viewer import viewer_html

    if not out_dir.is_dir():
        raise UsageError(f"{str(out_dir)!r} is not a directory; give the --out directory of "
                         "'llm-connect calibrate' or 'llm-connect demo'")
    path = out_dir / JUDGMENTS_FILE
    if not path.is_file():
        raise UsageError(f"no {JUDGMENTS_FILE} in {str(out_dir)!r}; 'llm-connect calibrate DATA --out DIR' and "
                         "'llm-connect demo --out DIR' write it")
    return viewer_html(read_judgments(path))


#: The Host headers the server answers (with or without its port), as Jupyter allows: a page elsewhere that
#: points its own name at 127.0.0.1 (DNS rebinding) sends its own name, and is refused.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _host_allowed(host: str | None, port: int) -> bool:
    """Whether a request's ``Host`` header names this server on the loopback interface."""
    if not host:
        return False
    host = host.strip().lower()
    return any(host in (name, f"{name}:{port}") for name in LOCAL_HOSTS)


def _serve(page: str, port: int) -> None:
    """Serve ``page`` at ``/?token=...`` on 127.0.0.1 (nothing else: no directory listing, no other file)
    until Ctrl-C.

    The page holds every judgment, so the server answers only a request that names it as a local host
    (``Host`` is ``127.0.0.1``, ``localhost`` or ``[::1]``, with or without the port: anything else is a
    403, which defeats DNS rebinding) and carries the random token printed with the URL (else a 403).
    """
    import hmac
    import secrets
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlsplit

    from ..views.viewer import content_security_policy

    body = page.encode("utf-8")
    token = secrets.token_urlsafe(32)
    bound = {"port": port}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server API names it so
            if not _host_allowed(self.headers.get("Host"), bound["port"]):
                self.send_error(403, "Forbidden", "this server answers only http://127.0.0.1 or localhost")
                return
            parts = urlsplit(self.path)
            given = parse_qs(parts.query).get("token", [""])[-1]
            if not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("ascii")):
                self.send_error(403, "Forbidden", "a missing or wrong token: open the URL llm-connect view printed")
                return
            if parts.path not in ("/", "/index.html", "/viewer.html"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", content_security_policy())
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")  # the URL holds the token
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise UsageError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; choose another --port") from None
    bound["port"] = server.server_address[1]
    with server:
        print(f"serving http://127.0.0.1:{bound['port']}/?token={token} (Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)


def _run_view(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..views.judgments import JUDGMENTS_FILE

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, got {args.port}")
    if args.serve and args.out:
        raise UsageError("--out writes the page and --serve serves it: choose one")
    out_dir = Path(args.out_dir)
    page = _page(out_dir)
    if args.serve:
        _serve(page, args.port)
        return 0
    target = Path(args.out) if args.out else out_dir / "viewer.html"
    if target.is_dir():
        raise UsageError(f"--out {str(target)!r} is a directory; give a file name such as viewer.html")
    if target.resolve() == (out_dir / JUDGMENTS_FILE).resolve():
        raise UsageError(f"--out {str(target)!r} would overwrite the judgments it shows")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    print(f"wrote {safe_text(target)}; open it in a browser (it works offline, from file://)")
    return 0
