# Checks that python_worker.py's compile_source(source, filename) answers as
# compile(source, filename, "exec") does: the same code objects, nested ones
# included (every co_ attribute, lines and positions), the same SyntaxError, and
# the same warnings written on stderr, with and without the warnings module, and
# that it does not make the ast module's classes. The worker's source comes on
# stdin. Prints each mismatch and exits 1 when there is one.
import gc
import io
import sys

CASES = [
    "",
    "x = 1\n",
    "import os\n\ndef sync(r):\n    def inner(a, *b, c=3, **d):\n        return [i for i in a if i]\n\n    class K:\n        def m(self):\n            return lambda q: q + 1\n\n    return {'a': f'{r!r:>10}', 'k': K, 'i': inner}\n",
    "async def f():\n    async with a as b:\n        await b\n    return [x async for x in b]\n",
    "def g():\n    yield from range(3)\n    try:\n        pass\n    except* ValueError:\n        pass\n",
    "from __future__ import annotations\n\ndef f(a: int) -> str:\n    pass\n",
    "x = 'caf\u00e9 \U0001f600'\n",
    # errors
    "def f(:\n",
    "def sync(request):\n    return {'a': 1,,}\n",
    "if True:\n  x = 1\n    y = 2\n",
    "def f():\nreturn 1\n",
    "return 1\n",
    "x = (\n",
    # warnings
    "x = 1 is 1\n",
    "x = 1 is 1\ny = 'a' is 'b'\ndef f(:\n",
    "x = '\\d'\n",
    "assert (1, 'message')\n",
]


def code_attrs(code):
    out = {"lines": list(code.co_lines()), "positions": list(code.co_positions())}
    for name in dir(code):
        if name.startswith("co_") and name not in ("co_lines", "co_positions"):
            value = getattr(code, name)
            if name == "co_consts":
                value = tuple(code_attrs(c) if isinstance(c, type(code)) else (type(c).__name__, repr(c)) for c in value)
            out[name] = value
    return out


def outcome(f):
    saved, sys.stderr = sys.stderr, io.StringIO()
    try:
        try:
            result = ("ok", code_attrs(f()))
        except SyntaxError as exc:
            result = ("error", type(exc).__name__, str(exc), exc.msg, exc.filename, exc.lineno, exc.offset, exc.text, exc.end_lineno, exc.end_offset)
        return result, sys.stderr.getvalue()
    finally:
        sys.stderr = saved


def ast_classes():
    return sum(1 for o in gc.get_objects() if isinstance(o, type) and o.__module__ == "ast")


failures = []
worker = {"__name__": "metalambda_worker"}
exec(sys.stdin.read(), worker)  # not compile(), which makes the ast classes
compile_source = worker["compile_source"]
if ast_classes():
    failures.append("the ast module's classes existed before the test")
for with_warnings in (False, True):
    if with_warnings:
        import warnings

        warnings.simplefilter("always")
    # compile_source first, on every source: compile() makes the ast classes.
    got = [outcome(lambda: compile_source(source, "test/fn")) for source in CASES]
    if not with_warnings and ast_classes():
        failures.append("compile_source made the ast module's classes")
    want = [outcome(lambda: compile(source, "test/fn", "exec")) for source in CASES]
    for source, g, w in zip(CASES, got, want):
        if g != w:
            failures.append("%r (warnings module %s):\n  compile_source: %r\n  compile:        %r" % (source, with_warnings, g, w))
for f in failures:
    print(f)
print("%d sources, %d mismatches" % (len(CASES), len(failures)))
sys.exit(1 if failures else 0)
