"""PythonLambda server: runs the code of a PythonLambda for each HTTP request.

The code is read from code.py next to this file (both come from the lambda's
ConfigMap), compiled once at start-up and executed for every request in a fresh
namespace holding:

    query_params  dict of lists, from urllib.parse.parse_qs
    method        the HTTP method, such as "GET"
    path          the request path, without the query string
    headers       dict of the request headers, names as sent
    body          the request body as text (UTF-8, undecodable bytes replaced)
    raw_body      the request body as bytes

The code sets `output`, answered as text/plain with status 200; an empty or
missing output answers "Lambda output was empty". An exception answers 500 and
its traceback goes to stderr.

GET /healthz answers 200 when the code compiled, else 503 with the syntax error.
A syntax error is printed to stderr at start-up, and every other request then
answers 503 with the error, so the pod stays unready instead of failing silently.

The server listens on 0.0.0.0, port $PORT (default 8080), one thread per request.

On SIGTERM (the pod is being deleted) it drains: /healthz answers 503 at once,
requests keep being served for $PYTHONLAMBDA_DRAIN_SECONDS (default 3) while the pod leaves
the Service's endpoints, then the server stops.
"""

import http.server
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import urllib.parse

HEALTH_PATH = "/healthz"
EMPTY_OUTPUT = "Lambda output was empty"
CODE_NAME = "spec.code"  # the file name tracebacks show for the user's code


def log(message):
    print("pythonlambda: " + message, file=sys.stderr, flush=True)


def compile_code(path):
    """Returns (code object, None) or (None, error text) for the code at path."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    # Tracebacks show the lines of the user's code under CODE_NAME.
    linecache.cache[CODE_NAME] = (len(source), None, source.splitlines(True), CODE_NAME)
    try:
        return compile(source, CODE_NAME, "exec"), None
    except (SyntaxError, ValueError) as err:
        return None, "".join(traceback.format_exception_only(type(err), err))


class Lambda:
    """The compiled code, or the reason it did not compile."""

    def __init__(self, code, error):
        self.code = code
        self.error = error
        self.draining = False

    def run(self, request):
        """Runs the code for one request; returns the text of its output."""
        namespace = {"__name__": "__lambda__", "__builtins__": __builtins__}
        namespace.update(request)
        exec(self.code, namespace)
        output = namespace.get("output")
        if output is None or output == "" or output == b"":
            return EMPTY_OUTPUT.encode()
        if isinstance(output, bytes):
            return output
        return str(output).encode("utf-8")


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "PythonLambda/1"
    lam = None  # set by serve

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        body = self.read_body()
        if url.path == HEALTH_PATH:
            self.health()
            return
        if self.lam.code is None:
            self.reply(503, "Lambda code has a syntax error; fix spec.code:\n" + self.lam.error)
            return
        request = {
            "query_params": urllib.parse.parse_qs(url.query),
            "method": self.command,
            "path": url.path,
            "headers": dict(self.headers.items()),
            "body": body.decode("utf-8", errors="replace"),
            "raw_body": body,
        }
        try:
            output = self.lam.run(request)
        except (Exception, SystemExit) as err:
            log("exception in %s %s:\n%s" % (self.command, self.path, traceback.format_exc().rstrip()))
            self.reply(500, "Lambda raised an exception: %s" % "".join(traceback.format_exception_only(type(err), err)))
            return
        self.reply(200, output)

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def health(self):
        if self.lam.code is None:
            self.reply(503, "Lambda code has a syntax error:\n" + self.lam.error)
        elif self.lam.draining:
            self.reply(503, "draining: the pod is stopping\n")
        else:
            self.reply(200, "ok\n")

    def reply(self, status, text):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_request(self, code="-", size="-"):
        if urllib.parse.urlsplit(self.path).path != HEALTH_PATH:
            super().log_request(code, size)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts of connections wait, not retry


def env_number(name, default, parse):
    try:
        return parse(os.environ.get(name) or default)
    except ValueError:
        log("%s=%r is not a number" % (name, os.environ[name]))
        sys.exit(2)


def drain_then_stop(server, lam, seconds):
    """Serves on for seconds with /healthz failing, then stops the server."""
    lam.draining = True
    log("SIGTERM: draining for %gs before stopping" % seconds)
    time.sleep(seconds)
    server.shutdown()


def serve():
    port = env_number("PORT", "8080", int)
    drain = env_number("PYTHONLAMBDA_DRAIN_SECONDS", "3", float)
    code_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "code.py")
    code, error = compile_code(code_path)
    if error:
        log("SYNTAX ERROR in spec.code; the pod stays unready and requests answer 503 until it is fixed:\n" + error.rstrip())
    lam = Lambda(code, error)
    Handler.lam = lam
    server = Server(("0.0.0.0", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=drain_then_stop, args=(server, lam, drain), daemon=True).start())
    log("serving on 0.0.0.0:%d (pod IP %s)" % (port, os.environ.get("POD_IP", "unknown")))
    # shutdown() (on SIGTERM) waits for the loop's next poll: at the default 0.5 s,
    # that was most of the time a deleted pod took to stop.
    server.serve_forever(poll_interval=0.05)
    server.server_close()


if __name__ == "__main__":
    serve()
