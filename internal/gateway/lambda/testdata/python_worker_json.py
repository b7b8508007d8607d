# Checks that python_worker.py's loads and dumps answer exactly as json.loads and
# json.dumps do (the same text, the same objects, the same exceptions and
# messages), on a table and on random trees. The worker's source comes on stdin;
# the seed of the random trees is argv[1]. Prints each mismatch and exits 1 when
# there is one.
import json
import math
import random
import sys

worker = {"__name__": "metalambda_worker"}
exec(compile(sys.stdin.read(), "python_worker.py", "exec"), worker)
loads, dumps = worker["loads"], worker["dumps"]
if worker["_json"] is None or worker["_scan"] is None:
    print("the worker does not use _json here: its fast path is untested")
    sys.exit(1)

failures = []
checked = 0


def outcome(f, *args, **kwargs):
    try:
        return ("ok", canonical(f(*args, **kwargs)))
    except json.JSONDecodeError as exc:
        return ("error", "JSONDecodeError", exc.msg, exc.pos, exc.lineno, exc.colno)
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def canonical(v):
    # Equal values of equal types, NaN equal to itself, key order kept.
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else repr(v))
    if isinstance(v, dict):
        return ("dict", type(v).__name__, [(canonical(k), canonical(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [canonical(x) for x in v])
    return (type(v).__name__, v)


def check(name, got, want):
    global checked
    checked += 1
    if got != want:
        failures.append("%s:\n  worker: %.300r\n  json:   %.300r" % (name, got, want))


def check_dumps(name, value):
    for compact in (False, True):
        for allow_nan in (True, False):
            separators = (",", ":") if compact else None
            want = outcome(json.dumps, value, allow_nan=allow_nan, separators=separators)
            got = outcome(dumps, value, compact=compact, allow_nan=allow_nan)
            check("dumps %s compact=%s allow_nan=%s" % (name, compact, allow_nan), got, want)


def check_loads(name, text):
    check("loads %s" % name, outcome(loads, text), outcome(json.loads, text))
    if isinstance(text, bytes):
        check("loads bytearray %s" % name, outcome(loads, bytearray(text)), outcome(json.loads, bytearray(text)))


class IntSub(int):
    pass


class FloatSub(float):
    pass


class StrSub(str):
    pass


class DictSub(dict):
    pass


circular = []
circular.append(circular)
circular_dict = {}
circular_dict["self"] = circular_dict
deep = []
for _ in range(100000):
    deep = [deep]

values = {
    "empty dict": {},
    "empty list": [],
    "empty string": "",
    "ascii": "hello",
    "non-ASCII": "\u00e9\u4e2d\u0416",
    "line separators": "\u2028\u2029",
    "astral": "\U0001f600",
    "lone surrogate": "\ud800x\udfff",
    "controls": "\x00\x01\x1f\x7f\"\\/\b\f\n\r\t",
    "zero": 0,
    "negative zero": -0.0,
    "float": 1.5,
    "small float": 5e-324,
    "large float": 1.7976931348623157e308,
    "repr float": 0.1 + 0.2,
    "inf": float("inf"),
    "-inf": float("-inf"),
    "nan": float("nan"),
    "nan in a list": [1, float("nan")],
    "big int": 2**200,
    "negative int": -(2**70),
    "true": True,
    "false": False,
    "none": None,
    "nested": {"a": {"b": [1, 2, {"c": None}]}, "d": []},
    "tuple": (1, "two", [3]),
    "int key": {1: "a", -2: "b"},
    "float key": {1.5: "a", float("inf"): "b"},
    "nan key": {float("nan"): 1},
    "bool and none keys": {True: 1, False: 2, None: 3},
    "tuple key": {(1, 2): 3},
    "bytes": {"x": b"bytes"},
    "set": {"x": {1}},
    "object": {"x": object()},
    "complex": 1j,
    "int subclass": IntSub(7),
    "float subclass": FloatSub(2.5),
    "str subclass": StrSub("s\u00e9"),
    "dict subclass": DictSub(a=1),
    "circular list": circular,
    "circular dict": circular_dict,
    "deep": deep,
}
for name, value in values.items():
    check_dumps(name, value)
# A failed encoding leaves nothing behind for the next one.
check_dumps("after failures", {"a": [1, 2, {"b": "c"}]})

texts = {
    "empty": b"",
    "blank": b" \t\r\n",
    "open": b"{",
    "extra data": b'{"a": 1} x',
    "trailing comma": b"[1,]",
    "NaN": b"NaN",
    "Infinity": b"[Infinity, -Infinity]",
    "escaped surrogate": b'"\\ud800"',
    "escaped pair": b'"\\ud83d\\ude00"',
    "UTF-8 BOM": b'\xef\xbb\xbf{"a": 1}',
    "UTF-16": '{"a": "\u00e9"}'.encode("utf-16"),
    "UTF-16-LE": '{"a": 1}'.encode("utf-16-le"),
    "UTF-16-BE": '{"a": 1}'.encode("utf-16-be"),
    "UTF-32": '{"a": 1}'.encode("utf-32"),
    "two bytes UTF-16": "1".encode("utf-16-le"),
    "invalid UTF-8": b'"\xff"',
    "encoded surrogate": b'"\xed\xa0\x80"',
    "raw non-ASCII": '{"\u00e9": "\u4e2d\U0001f600"}'.encode(),
    "whitespace": b'  {"a" : [1, 2.5e3, -0, -0.0, true, false, null]}  \n',
    "number": b"1",
    "string": b'"x"',
    "deep": b"[" * 100000 + b"]" * 100000,
    "duplicate keys": b'{"a": 1, "a": 2}',
    "huge exponent": b"[1.0e400, -1e400]",
    "too many digits": b"1" * 5000,
    "control in a string": b'"\x01"',
    "bad escape": b'"\\x"',
    "single quotes": b"{'a': 1}",
    "leading zero": b"01",
    "frame": b'{"request": {"parent": {"metadata": {"name": "\xc3\xbc"}}}}\n',
    "str": '{"a": "\u00e9"}',
    "str BOM": '\ufeff{"a": 1}',
    "str NUL": "\x00",
    "none": None,
    "int": 123,
}
for name, text in texts.items():
    check_loads(name, text)
# The gateway's frames and valid UTF-8 JSON take the fast path.
for name in ("number", "string", "whitespace", "frame", "raw non-ASCII", "escaped pair", "NaN", "duplicate keys", "str"):
    check("fast path of %s" % name, worker["_fast_loads"](texts[name], worker["_scan"])[1], True)


def random_string(rnd):
    pools = [(0x20, 0x7E), (0, 0x1F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xD800, 0xDFFF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
    out = []
    for _ in range(rnd.randint(0, 12)):
        lo, hi = rnd.choice(pools)
        out.append(chr(rnd.randint(lo, hi)))
    return "".join(out)


def random_scalar(rnd):
    kind = rnd.randint(0, 7)
    if kind == 0:
        return rnd.randint(-(2**64), 2**64)
    if kind == 1:
        return rnd.random() * 10 ** rnd.randint(-320, 308) * rnd.choice((1, -1))
    if kind == 2:
        return rnd.choice((float("inf"), float("-inf"), float("nan"), 0.0, -0.0))
    if kind == 3:
        return rnd.choice((True, False, None))
    return random_string(rnd)


def random_tree(rnd, depth):
    if depth > 4 or rnd.random() < 0.3:
        return random_scalar(rnd)
    if rnd.random() < 0.5:
        return [random_tree(rnd, depth + 1) for _ in range(rnd.randint(0, 5))]
    keys = [random_string(rnd) for _ in range(rnd.randint(0, 5))]
    if rnd.random() < 0.2:
        keys.append(rnd.choice((1, 2.5, True, None)))
    return {k: random_tree(rnd, depth + 1) for k in keys}


rnd = random.Random(int(sys.argv[1]))
for i in range(1000):
    tree = random_tree(rnd, 0)
    check_dumps("random tree %d" % i, tree)
    text = json.dumps(tree)
    check_loads("random tree %d" % i, text.encode("utf-8", "surrogatepass"))
    check_loads("random tree %d as str" % i, text)
    # What json.dumps writes, the fast path reads without the json package.
    check("fast path of random tree %d" % i, worker["_fast_loads"](text.encode(), worker["_scan"])[1], True)
    compact = json.dumps(tree, separators=(",", ":"), ensure_ascii=False)
    check_loads("random tree %d unescaped" % i, compact.encode("utf-8", "surrogatepass"))
    cut = rnd.randint(0, len(text))
    check_loads("random tree %d cut at %d" % (i, cut), text[:cut].encode("utf-8", "surrogatepass"))

for f in failures:
    print(f)
print("%d checks, %d mismatches" % (checked, len(failures)))
sys.exit(1 if failures else 0)
