"""``sparkmirror ctl``: the client of a running replicator's control API (``replicator.api``).

``status`` lists each flow's state; ``pause FLOW`` / ``resume FLOW`` stop and restart one
flow's copy (the pause outlives a restart of the replicator); ``reload`` makes it read its
mm2.properties again. The password comes from a file or ``$SPARKMIRROR_CTL_PASSWORD``,
never from the command line (where ``ps`` would show it).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote

from sparkmirror.errors import ClusterError, UsageError

DEFAULT_URL = "http://127.0.0.1:9465"

_EPILOG = """\
exit status:
  0  done (status printed, flow paused or resumed, file reloaded)
  1  the replicator could not be reached, or it refused (its answer is printed); or the
     reload applied the file but a flow did not start (which, and why, is printed)
  2  bad command line; or the reload was refused (the file's FILE:LINE error is printed)

examples:
  sparkmirror ctl status
  sparkmirror ctl pause 'primary->dr'
  sparkmirror ctl --url https://replicator:9465 --user ops --password-file ~/.ctl-pass --cacert ca.crt reload
"""


def _request(args, method: str, path: str) -> tuple[int, dict]:
    url = args.url.rstrip("/") + path
    data = b"{}" if method == "POST" else None
    req = urllib.request.Request(url, data=data, method=method)
    if method == "POST":
        req.add_header("Content-Type", "application/json")
    if args.user:
        password = _password(args)
        token = base64.b64encode(f"{args.user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=args.cacert) if args.cacert else ssl.create_default_context()
    try:
        with urllib.request.urlopen(req, timeout=args.timeout, context=context) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            answer = json.loads(body)
        except ValueError:
            answer = {"error": body.decode(errors="replace").strip()[:500] or exc.reason}
        return exc.code, answer
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ClusterError(f"cannot reach the replicator's control API at {args.url}: {reason}",
                           hint="is `sparkmirror replicate` running, with --metrics-listen at this address?") from None


def _password(args) -> str:
    if args.password_file:
        try:
            with open(os.path.expanduser(args.password_file)) as f:
                return f.readline().rstrip("\r\n")
        except OSError as exc:
            raise UsageError(f"--password-file {args.password_file}: {exc.strerror}") from None
    password = os.environ.get("SPARKMIRROR_CTL_PASSWORD")
    if password is None:
        raise UsageError("--user needs a password: --password-file FILE or $SPARKMIRROR_CTL_PASSWORD")
    return password


def _status_table(flows: list[dict]) -> str:
    rows = [["FLOW", "STATE", "DATA PATH", "PARTITIONS", "RECORDS", "BYTES", "LAST BATCH", "NOTE"]]
    for f in flows:
        last = f.get("last_batch_at")
        ago = f"{max(0, int(time.time() - last))} s ago" if last else "-"
        note = ""
        if f.get("paused"):
            note = f"paused by {f['paused'].get('by')}"
        elif f.get("last_error"):
            note = f["last_error"][:80]
        rows.append([f["flow"], f["state"], f.get("data_path") or "-", str(f.get("partitions", "")),
                     str(f.get("records", "")), str(f.get("bytes", "")), ago, note])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run(args: argparse.Namespace) -> int:
    if args.action == "status":
        status, body = _request(args, "GET", "/api/flows")
    elif args.action in ("pause", "resume"):
        if not args.flow:
            raise UsageError(f"ctl {args.action} needs a FLOW, e.g. 'primary->dr'")
        status, body = _request(args, "POST", f"/api/flows/{quote(args.flow, safe='')}/{args.action}")
    else:
        status, body = _request(args, "POST", "/api/reload")
    if args.json:
        print(json.dumps(body))
    elif status == 200 and args.action == "status":
        print(_status_table(body.get("flows", [])))
    elif args.action == "reload" and "added" in body:  # applied (some flows may not have started)
        print("reloaded: " + "; ".join(f"{k} {', '.join(body.get(k) or []) or '-'}"
                                       for k in ("added", "removed", "changed", "unchanged")))
    elif status == 200:
        print(f"{body.get('flow')}: {body.get('result')}")
    if status == 200:
        return 0
    error = body.get("error") or f"HTTP {status}"
    if not args.json:
        refused_file = args.action == "reload" and status == 400
        print(error if refused_file else f"sparkmirror: error: the replicator answered {status}: {error}",
              file=sys.stderr)
    return 2 if args.action == "reload" and status == 400 else 1


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "ctl", help="inspect, pause, resume or reload a running replicator (its control API)",
        description="Talk to a running `sparkmirror replicate` over its control API, on its --metrics-listen "
                    "port: status of each flow, pause or resume one flow, reload mm2.properties.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("status", "pause", "resume", "reload"))
    parser.add_argument("flow", nargs="?", metavar="FLOW", help="the flow to pause or resume, as A->B")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the replicator's metrics address (default {DEFAULT_URL})")
    parser.add_argument("--user", help="basic auth user (the password: --password-file or $SPARKMIRROR_CTL_PASSWORD)")
    parser.add_argument("--password-file", metavar="FILE", help="a file whose first line is the password")
    parser.add_argument("--cacert", metavar="FILE", help="CA certificate to verify an https replicator with")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer (default 60)")
    parser.add_argument("--json", action="store_true", help="print the replicator's JSON answer")
    parser.set_defaults(func=run)
