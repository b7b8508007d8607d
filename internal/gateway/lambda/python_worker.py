# Metalambda Python worker: loads one function and serves its calls.
#
# Protocol, one JSON object per line on private copies of stdin/stdout (fds 0 and 1
# are then pointed at /dev/null and stderr, so stray output cannot corrupt it):
#   <- {"source": ..., "handler": ..., "filename": ..., "memory_limit": bytes, "env": {...}}
#   -> {"ok": true} or {"ok": false, "error": {...}}
#   <- {"request": {...}}
#   -> {"ok":true,"logs":"...","response":{...}}  (response compact, as JSON.stringify writes it;
#      no "logs" when the call printed nothing: the gateway reads that reply without decoding it)
#   -> {"ok": false, "error": {"type", "message", "traceback"}, "logs": "...", "fatal": bool}
# argv[1:] is a marker the gateway uses to recognise its workers. A worker may be
# started before it is known which function it will serve (a spare): everything of
# the function, its environment included, comes in the first frame.
#
# The gateway does not pass this source to the interpreter: compiling it kept
# about 0.9 MiB in every worker (the parser's and compiler's memory, freed but
# not given back, and the source's copies on the command line). It compiles it
# once with the same interpreter, as "<string>" as -c would, and starts each
# worker with a few lines that read the marshalled code on stdin, before the
# first frame, and run it in __main__ (pythonWorkerBoot in python.go). A zygote
# (python_zygote.py) compiles it itself, once, for all its children.
#
# The worker imports only what every call needs, since each module stays in every
# warm worker's memory: traceback (about 1.4 MiB with what it imports) when an
# error is formatted, and not the json package, whose decoder imports re and its
# compiler (about 1.1 MiB); see loads and dumps below. A function that imports
# them itself has them as usual.
import io
import os
import sys

MAX_LOGS = 64 * 1024


# JSON, with the C scanner and encoder (_json) that json.loads and json.dumps
# use, set up as json sets them up: the same bytes out, the same objects in.
# Input that the fast path refuses (invalid JSON, another encoding, a BOM) goes
# to json.loads, which raises its own error for it. Where _json is missing or
# does not answer a probe as json does (another interpreter), the json package
# does all of it.
try:
    import _json
except ImportError:
    _json = None


class _DecoderContext:
    # The attributes c_make_scanner reads from a json.JSONDecoder().
    def __init__(self):
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
        self.memo = {}


def _not_serializable(o):
    # json.JSONEncoder.default
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _json_package():
    import json

    return json


def _fast_loads(s, scan):
    # json.loads: bytes are UTF-8 unless a BOM or a zero byte in the first two
    # says otherwise (json.detect_encoding); a str starting with a BOM is refused.
    if isinstance(s, (bytes, bytearray)):
        if not s or s[0] in (0, 0xEF, 0xFE, 0xFF) or (len(s) > 1 and s[1] == 0):
            return None, False
        try:
            s = s.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None, False
    elif not isinstance(s, str) or s.startswith("\ufeff"):
        return None, False
    # json.decoder.JSONDecoder.decode, its whitespace without re.
    n, idx = len(s), 0
    while idx < n and s[idx] in " \t\n\r":
        idx += 1
    try:
        obj, end = scan(s, idx)
    except Exception:
        return None, False
    while end < n and s[end] in " \t\n\r":
        end += 1
    if end != n:
        return None, False
    return obj, True


def loads(s):
    """json.loads(s)"""
    if _scan is not None:
        obj, ok = _fast_loads(s, _scan)
        if ok:
            return obj
    return _json_package().loads(s)


def dumps(o, compact=False, allow_nan=True):
    """json.dumps(o, allow_nan=allow_nan), with separators=(",", ":") if compact"""
    if _json is None:
        separators = (",", ":") if compact else None
        return _json_package().dumps(o, allow_nan=allow_nan, separators=separators)
    # json.JSONEncoder.encode and iterencode: a new encoder, so new markers, per
    # call (an encoding that failed leaves its markers behind).
    if isinstance(o, str):
        return _json.encode_basestring_ascii(o)
    item, key = (",", ":") if compact else (", ", ": ")
    encode = _json.make_encoder({}, _not_serializable, _json.encode_basestring_ascii, None, key, item, False, False, allow_nan)
    chunks = encode(o, 0)
    if not isinstance(chunks, (list, tuple)):
        chunks = list(chunks)
    return "".join(chunks)


def _probe():
    # What json answers for these on the interpreters the worker was written
    # against; any other answer leaves JSON to the json package.
    text = '{"a": [1, -2.5, 1e+100, null, true, false, "\\u00e9\\n\\ud83d\\ude00"], "b": {}}'
    value = {"a": [1, -2.5, 1e100, None, True, False, "\u00e9\n\U0001f600"], "b": {}}
    obj, ok = _fast_loads(text.encode(), _scan)
    if not ok or obj != value or dumps(value) != text:
        return False
    if dumps({"x": [1, {}]}, compact=True) != '{"x":[1,{}]}' or dumps("\u00e9") != '"\\u00e9"':
        return False
    try:
        dumps([float("nan")], allow_nan=False)
    except ValueError:
        return dumps([float("nan")]) == "[NaN]"
    return False


try:
    _scan = _json.make_scanner(_DecoderContext()) if _json is not None else None
    if _json is not None and not _probe():
        _json = _scan = None
except Exception:
    _json = _scan = None


def add_site_packages():
    # The interpreter runs with -S, so the installation's start-up hooks (the
    # import lines of .pth files, sitecustomize) do not run in every function's
    # worker: they cost each worker about 3 MiB and half its start on a Debian
    # host. What site would put on sys.path is still there: the site-packages
    # directories (the gateway asked the interpreter for them without -S, so a
    # virtual environment's are found) and the directories their .pth files
    # name; and so are the builtins site adds (exit, quit, help, copyright).
    import site

    site.setquit()
    site.setcopyright()
    site.sethelper()
    sitedirs = []
    for arg in sys.argv[1:]:
        if arg.startswith("site-packages="):
            sitedirs = loads(arg[len("site-packages="):])
    for sitedir in sitedirs:
        if not os.path.isdir(sitedir):
            continue
        add_path(sitedir)
        try:
            names = sorted(os.listdir(sitedir))
        except OSError:
            continue
        for name in names:
            if name.endswith(".pth") and not name.startswith("."):
                add_pth_paths(sitedir, name)


def add_pth_paths(sitedir, name):
    try:
        with open(os.path.join(sitedir, name), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        line = line.rstrip()
        if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
            continue
        path = os.path.join(sitedir, line)
        if os.path.exists(path):
            add_path(path)


def add_path(path):
    path = os.path.abspath(path)
    if path not in sys.path:
        sys.path.append(path)


def open_protocol():
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return proto_in, proto_out


def send(out, msg):
    out.write(dumps(msg).encode() + b"\n")
    out.flush()


def limit_memory(limit):
    if limit and limit > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def set_environment(env):
    # os.environ is what the function and the processes it starts see.
    if env:
        os.environ.update(env)
        if "TZ" in env:
            import time

            time.tzset()


def error_of(exc):
    # The first frame is the worker's own (call or load): leave it out.
    import traceback

    frames = exc.__traceback__.tb_next if exc.__traceback__ else None
    tb = traceback.format_exception(type(exc), exc, frames)
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(tb),
    }


def load(init):
    filename = init.get("filename") or "<function>"
    try:
        code = compile_source(init["source"], filename)
    except SyntaxError as exc:
        return None, {
            "type": type(exc).__name__,
            "message": exc.msg or str(exc),
            "line": exc.lineno or 0,
            "column": exc.offset or 0,
        }
    namespace = {"__name__": "function", "__file__": filename}
    try:
        exec(code, namespace)
    except BaseException as exc:  # a top-level failure is a load error
        err = error_of(exc)
        err["line"] = top_level_line(exc, filename)
        return None, err
    handler = namespace.get(init["handler"])
    if not callable(handler):
        return None, {
            "type": "NameError",
            "message": "no handler: define def %s(request)" % init["handler"],
        }
    return handler, None


class _Compiled(Exception):
    pass


def compile_source(source, filename):
    """compile(source, filename, "exec"), without making the ast module's classes

    compile() makes them at its first call, to check whether source is an AST:
    about 120 classes, 0.2 MiB kept for the worker's life. exec of a string
    compiles it as "<string>" without them: its module's code is taken as it
    starts (a profile function sees the call before the first instruction runs)
    and given filename, as the warnings the compiler writes are and a
    SyntaxError's filename."""
    captured, here = [], sys._getframe()

    def catch(frame, event, arg):
        # Not the calls of the warnings module, which may write a warning.
        if event == "call" and frame.f_back is here and frame.f_code.co_name == "<module>":
            captured.append(frame.f_code)
            raise _Compiled

    stderr, sys.stderr = sys.stderr, io.StringIO()
    sys.setprofile(catch)
    try:
        exec(source, {})
    except _Compiled:
        pass
    except SyntaxError as exc:
        if exc.filename == "<string>":
            exc.filename = filename
        raise
    finally:
        sys.setprofile(None)
        warnings, sys.stderr = sys.stderr.getvalue(), stderr
        if warnings:
            stderr.write(_renamed_lines(warnings, filename))
    return _renamed(captured[0], filename)


def _renamed(code, filename):
    # Without recursion: code objects may nest deeper than the recursion limit
    # (compile() accepts 900 nested lambdas). A code object comes after its
    # parent in order, so in reverse each is renamed before its parent.
    code_type, order, stack = type(code), [], [code]
    while stack:
        c = stack.pop()
        order.append(c)
        stack.extend(k for k in c.co_consts if isinstance(k, code_type))
    renamed = {}
    for c in reversed(order):
        consts = tuple(renamed[id(k)] if isinstance(k, code_type) else k for k in c.co_consts)
        renamed[id(c)] = c.replace(co_filename=filename, co_consts=consts)
    return renamed[id(code)]


def _renamed_lines(text, filename):
    # A warning's line starts with its file's name: "<string>:3: SyntaxWarning: ...".
    lines = text.splitlines(True)
    for i, line in enumerate(lines):
        if line.startswith("<string>:"):
            lines[i] = filename + line[len("<string>"):]
    return "".join(lines)


def top_level_line(exc, filename):
    import traceback

    line = 0
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename:
            line = frame.lineno or 0
    return line


class Capture(io.StringIO):
    def write(self, s):
        if self.tell() < MAX_LOGS:
            return super().write(s[: MAX_LOGS - self.tell()])
        return len(s)


def call(handler, request):
    logs = Capture()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = logs
    try:
        response = handler(request)
        if not isinstance(response, dict):
            return fail("BadReturn", "returned %s, want a dict" % type(response).__name__, logs)
        try:
            encoded = dumps(response, compact=True, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            return fail("BadReturn", "the response cannot be serialized: %s" % exc, logs)
        printed = logs.getvalue()
        if printed:
            return '{"ok":true,"logs":%s,"response":%s}' % (dumps(printed), encoded)
        return '{"ok":true,"response":' + encoded + "}"
    except MemoryError as exc:
        return failure(exc, logs, fatal=True)
    except Exception as exc:
        return failure(exc, logs, fatal=False)
    finally:
        sys.stdout, sys.stderr = saved


def fail(kind, message, logs):
    msg = {"ok": False, "error": {"type": kind, "message": message}, "logs": logs.getvalue()}
    return dumps(msg)


def failure(exc, logs, fatal):
    err = error_of(exc)
    msg = {"ok": False, "error": err, "logs": logs.getvalue(), "fatal": fatal}
    return dumps(msg)


def serve(proto_in, proto_out, handler):
    while True:
        line = proto_in.readline()
        if not line:
            return
        request = loads(line)["request"]
        proto_out.write((call(handler, request) + "\n").encode())
        proto_out.flush()


def main():
    add_site_packages()
    proto_in, proto_out = open_protocol()
    line = proto_in.readline()
    if not line:
        return
    init = loads(line)
    limit_memory(init.get("memory_limit"))
    set_environment(init.get("env"))
    handler, err = load(init)
    if err is not None:
        send(proto_out, {"ok": False, "error": err})
        return
    send(proto_out, {"ok": True})
    serve(proto_in, proto_out, handler)


if __name__ == "__main__":
    main()
