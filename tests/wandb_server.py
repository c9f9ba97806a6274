"""A stand-in for the W&B server, the one part of W&B that cannot exist here.

Real ``wandb sync`` (wandb-core) talks to it over HTTP exactly as it talks to
api.wandb.ai: GraphQL ``UpsertBucket`` (create or resume the run),
``CreateRunFiles`` (where to PUT files), and the run's ``file_stream`` (history
rows, system metrics, summary; the last post says ``complete``).  The server
answers those with the fields wandb-core reads and records what arrived: per
run id, every history row in arrival order, the uploaded file names and
whether the stream completed.  Anything else gets an empty ``data``.

    with WandbServer() as srv:
        env = {"WANDB_BASE_URL": srv.url, "WANDB_API_KEY": "0" * 40}
        ... wandb sync ...
        srv.history("RUN_ID")  # [{"_step": 0, "loss": ...}, ...]
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WandbServer:
    def __init__(self):
        self.lock = threading.Lock()
        self.rows: dict[str, list[dict]] = defaultdict(list)
        self.files: dict[str, set[str]] = defaultdict(set)
        self.completed: dict[str, bool] = {}
        self.upserts: list[dict] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> "WandbServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def history(self, run_id: str) -> list[dict]:
        with self.lock:
            return list(self.rows[run_id])

    def steps(self, run_id: str) -> list[int]:
        return [int(r["_step"]) for r in self.history(run_id)]

    # -- what the handler calls -------------------------------------------------
    def graphql(self, op: str, v: dict) -> dict:
        if op == "UpsertBucket":
            with self.lock:
                self.upserts.append(v)
            name = v.get("name") or v.get("id") or "run"
            return {
                "upsertBucket": {
                    "inserted": True,
                    "bucket": {
                        "id": f"run:{name}",
                        "name": name,
                        "displayName": v.get("displayName") or name,
                        "description": "",
                        "config": "{}",
                        "sweepName": None,
                        "summaryMetrics": "{}",
                        "historyLineCount": 0,
                        "eventsLineCount": 0,
                        "project": {
                            "id": "project:1",
                            "name": v.get("project") or "uncategorized",
                            "entity": {"id": "entity:1", "name": v.get("entity") or "dw-test"},
                        },
                    },
                }
            }
        if op == "CreateRunFiles":
            return {
                "createRunFiles": {
                    "runID": f"run:{v.get('run')}",
                    "uploadHeaders": [],
                    "files": [
                        {"name": f, "uploadUrl": f"{self.url}/upload/{v.get('run')}/{f}"} for f in v.get("files", [])
                    ],
                }
            }
        return {}

    def stream(self, run_id: str, doc: dict) -> None:
        with self.lock:
            for name, part in (doc.get("files") or {}).items():
                if name == "wandb-history.jsonl":
                    self.rows[run_id].extend(json.loads(line) for line in part.get("content", []))
            if doc.get("complete"):
                self.completed[run_id] = True

    def upload(self, run_id: str, name: str) -> None:
        with self.lock:
            self.files[run_id].add(name)


def _handler(srv: WandbServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _reply(self, doc: dict) -> None:
            out = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def do_POST(self):
            body, parts = self._body(), self.path.strip("/").split("/")
            if parts[0] == "graphql":
                q = json.loads(body or b"{}")
                return self._reply({"data": srv.graphql(q.get("operationName") or "", q.get("variables") or {})})
            if parts[0] == "files" and parts[-1] == "file_stream":  # files/ENTITY/PROJECT/RUN/file_stream
                srv.stream(parts[-2], json.loads(body or b"{}"))
                return self._reply({"exitcode": None, "limits": {}})
            return self._reply({})

        def do_PUT(self):
            self._body()
            parts = self.path.strip("/").split("/")
            if parts[0] == "upload" and len(parts) >= 3:
                srv.upload(parts[1], "/".join(parts[2:]))
            self._reply({})

        def do_GET(self):
            self._reply({})

    return Handler
