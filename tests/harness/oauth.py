"""An OAuth 2 token endpoint of the test's own, for SASL/OAUTHBEARER with librdkafka's OIDC
method (`sasl.oauthbearer.method = oidc`): the client credentials grant, in a thread of the test
process, on a free loopback port (Spark's local workers reach it too).

It hands out unsecured JWTs (`"alg": "none"`, no signature) for `sub` = the client id, which
Apache Kafka's default OAUTHBEARER validator (OAuthBearerUnsecuredValidatorCallbackHandler)
accepts; librdkafka reads a token's claims and never checks its signature. A wrong client id or
secret gets 401 `invalid_client`, as a real identity provider answers. Usable without pytest.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.harness.ports import free_port


def _b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured_jwt(subject: str, seconds: int = 3600) -> str:
    now = int(time.time())
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': subject, 'iat': now, 'exp': now + seconds})}."


class TokenEndpoint:
    """POST /token with HTTP Basic `client_id:secret` -> {"access_token": ...}; `granted` and
    `refused` count the answers."""

    def __init__(self, client_id: str, secret: str):
        self.client_id, self.secret = client_id, secret
        self.granted = self.refused = 0
        self.port = free_port()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                expected = base64.b64encode(f"{endpoint.client_id}:{endpoint.secret}".encode()).decode()
                if self.path != "/token" or self.headers.get("Authorization") != f"Basic {expected}":
                    endpoint.refused += 1
                    self._answer(401, {"error": "invalid_client"})
                    return
                endpoint.granted += 1
                self._answer(200, {"access_token": unsecured_jwt(endpoint.client_id), "token_type": "bearer",
                                   "expires_in": 3600})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def start(self) -> "TokenEndpoint":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "TokenEndpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
