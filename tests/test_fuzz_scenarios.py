"""Fuzzed scenario files: whatever bytes a scenario file holds, load_scenario either returns a valid
Scenario or raises ConfigError (one line, naming what is wrong) -- never another exception, never a
hang. Every loaded scenario also survives dumps -> load_scenario unchanged (what resume relies on),
and its variants and sweep members load too.

Inputs (deterministic: random.Random with fixed seeds, so the counts below are exact):

* every field of every section x a table of hostile values (wrong types, 1e308, 10**30, 10**400,
  a 5000-digit integer, negative values, NaN, +-inf, unicode, nested tables, mixed arrays, dates);
* structural mutations of the real files under scenarios/ (values replaced, keys deleted, renamed
  or added, sections dropped or turned into scalars and arrays, variants and sweeps corrupted),
  written back as TOML text, then text mutations (truncation, lines deleted, duplicated or swapped,
  characters inserted, bytes flipped, invalid UTF-8);
* random TOML-like text from a small grammar, binary garbage, empty, whitespace-only and BOM files,
  deep nesting;
* --set style overrides: real field paths with hostile values, and garbage strings.

Each case runs under a wall-clock alarm (CASE_TIMEOUT_S); the number of inputs tried is asserted and
reported (pytest -s prints it). FUZZ_SCALE=k multiplies the random cases by k (slow-marked run).
"""
from __future__ import annotations

import copy

import dataclasses
import datetime
import math
import os
import random
import re
import signal
import sys
import tempfile
import typing
from pathlib import Path

import pytest

from wirelessfl.config import ConfigError, Scenario, dumps, load_scenario
from wirelessfl.plugins import KINDS, registry

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_FILES = sorted((ROOT / "scenarios").rglob("*.toml"))
CASE_TIMEOUT_S = 5.0  # a load takes milliseconds; this only catches hangs
SCALE = int(os.environ.get("FUZZ_SCALE", "1"))
COUNTS: dict[str, int] = {}


@pytest.fixture
def scratch(tmp_path):
    """A directory for the case files: tmpfs when there is one (a write there takes ~0.1 ms, on a
    loaded disk several ms, which would dominate the run time)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm) as tmp:
            yield Path(tmp)
    else:
        yield tmp_path


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"no answer within {CASE_TIMEOUT_S} s")


HUGE_INT = 10 ** 5000 - 1  # more digits than int -> str converts by default
HOSTILE = [
    True, False, 0, -1, 1, 2, -10 ** 30, 10 ** 30, 2 ** 63, -2 ** 63 - 1, 10 ** 400, HUGE_INT,
    0.0, -0.0, 0.5, -1.5, 1e308, -1e308, 1e-308, 5e-324, math.nan, math.inf, -math.inf,
    "", " ", "x", "35 dB", "-35 dB", "1e400 dB", "4000 dB", "-4000 dB", "nan dB", "inf dB", "dB",
    "lyapunov", "uniform", "linear", "tdma", "ü漢字🙂", "\x00\x01\x7f", "a\nb", '"quoted" \\ back',
    "x" * 10000, [], [1, 2, 3], [1.0, "a", True], [[1, 2], [3]], [[[[[]]]]], [math.nan], [1e308] * 3,
    [{"a": 1}], {}, {"a": 1}, {"nested": {"deep": {"deeper": 1}}}, {"ü": "漢"},
    datetime.datetime(1979, 5, 27, 7, 32), datetime.date(2020, 2, 29), datetime.time(23, 59, 59),
]


# ---------------------------------------------------------------------------------------------
# a TOML writer for arbitrary (also invalid-for-scenarios) documents


_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
# str.translate's table: the escapes above, other control characters as \uXXXX
_ESCAPES = {i: _ESC.get(chr(i)) or f"\\u{i:04x}" for i in [*range(0x20), 0x7F]} | {ord(c): e for c, e in _ESC.items()}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_str(s: str) -> str:
    return '"' + s.translate(_ESCAPES) + '"'


def toml_key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else toml_str(k)


def toml_val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return hex(v) if v > 10 ** 4000 else str(v)  # keep within int->str limits
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_val(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_doc(doc: dict) -> str:
    lines = [f"{toml_key(k)} = {toml_val(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{toml_key(k)}]")
            lines.extend(f"{toml_key(kk)} = {toml_val(vv)}" for kk, vv in v.items())
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# running one case


def field_paths() -> list[str]:
    """Every scalar field path of a Scenario (also fields added later)."""
    hints = typing.get_type_hints(Scenario)
    paths = []
    for f in dataclasses.fields(Scenario):
        if dataclasses.is_dataclass(hints[f.name]):
            paths.extend(f"{f.name}.{g.name}" for g in dataclasses.fields(hints[f.name]))
        elif f.name not in ("variants", "sweep"):
            paths.append(f.name)
    return paths


def field_cases() -> list[tuple[str, dict]]:
    """(path, the tables that name the part it belongs to) for every scalar field of a Scenario and
    every option of every built-in part (also fields and parts added later)."""
    cases = [(path, {}) for path in field_paths()]
    for kind in KINDS.values():
        reg = registry(kind.name)
        for name in reg.builtins:
            for f in dataclasses.fields(reg.load(name).Options):
                cases.append((f"{kind.table}.{f.name}", {kind.table: {kind.key: name}}))
    return cases


def check_case(tmp: Path, content: bytes | str, overrides=(), failures=None, label=""):
    """Load one input; return 'loaded' or 'error'; anything else is appended to ``failures``."""
    path = tmp / "case.toml"
    if isinstance(content, str):
        content = content.encode("utf-8", errors="surrogatepass")
    path.write_bytes(content)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT_S)
    stage = "load"
    try:
        try:
            scenario = load_scenario(path, overrides)
        except ConfigError as exc:
            msg = str(exc)
            if "\n" in msg:
                failures.append((label, content, overrides, f"multi-line ConfigError: {msg}"))
            return "error"
        # a loaded scenario writes back to an equal one, and its family members are valid
        stage = "round trip"
        path.write_text(dumps(scenario), encoding="utf-8")
        again = load_scenario(path)
        assert again == scenario, "dumps -> load_scenario changed the scenario"
        stage = "members"
        scenario.variant_scenarios()
        for key, values in scenario.sweep:
            for value in values:
                scenario.member((key, value))
        return "loaded"
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        if isinstance(exc, KeyboardInterrupt):
            raise
        failures.append((label, content, overrides, f"{type(exc).__name__} ({stage}): {exc}"))
        return "failure"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def short(x, limit=240) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def report(name: str, outcomes: list[str], failures: list, minimum: int) -> None:
    COUNTS[name] = len(outcomes)
    print(f"\n{name}: {len(outcomes)} inputs, {outcomes.count('loaded')} loaded, "
          f"{outcomes.count('error')} ConfigError, {len(failures)} other")
    kinds: dict[str, tuple] = {}
    for lab, out, ov, err in failures:  # one example per kind of failure
        kinds.setdefault(err[:60], (lab, out, ov, err))
    assert not failures, f"{len(failures)} failures, {len(kinds)} kinds:\n" + "\n".join(
        f"[{lab}] {short(out)}\n   overrides={short(ov)}\n   -> {short(err)}" for lab, out, ov, err in kinds.values())
    assert len(outcomes) >= minimum
    assert outcomes.count("loaded") > 0 and outcomes.count("error") > 0


def seed_docs() -> list[dict]:
    import tomllib

    docs = [tomllib.loads(p.read_text()) for p in SCENARIO_FILES]
    docs.append({"run": {"rounds": 5}})
    return docs


# ---------------------------------------------------------------------------------------------
# 1. every field x every hostile value


def test_every_field_with_hostile_values(scratch):
    assert SCENARIO_FILES, "no scenario files found"
    failures, outcomes = [], []
    base = {"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 3}}
    for path, naming in field_cases():
        for value in HOSTILE:
            doc = {k: dict(v) for k, v in base.items()}
            for table, selector in naming.items():
                doc.setdefault(table, {}).update(selector)
            if "." in path:
                section, key = path.split(".")
                doc.setdefault(section, {})[key] = value
            else:
                doc[path] = value
            outcomes.append(check_case(scratch, toml_doc(doc), (), failures, path))
    # the same values inside [variants] and [sweep], and as those tables themselves
    for i, value in enumerate(HOSTILE):
        placements = [
            {"variants": {"a": {"scheduler.V": value}}}, {"variants": {"a": {"name": value}}},
            {"variants": {"a": value}}, {"variants": value},
            {"variants": {value if isinstance(value, str) else "k": {}}},
            {"sweep": {"scheduler.V": [value]}}, {"sweep": {"name": [value, "b"]}},
            {"sweep": {"scheduler": {"lam": [1.0, value]}}}, {"sweep": {"scheduler.m": value}},
            {"sweep": value}]
        for j, special in enumerate(placements):
            doc = {**{k: dict(v) for k, v in base.items()}, **special}
            outcomes.append(check_case(scratch, toml_doc(doc), (), failures, f"placement {j}, value {i}"))
    report("field x hostile value", outcomes, failures, 150 * len(HOSTILE))


# ---------------------------------------------------------------------------------------------
# 2. mutations of the real scenario files


def random_value(rng: random.Random):
    roll = rng.random()
    if roll < 0.6:  # a copy: mutations write into tables, and a shared one could come to hold itself
        return copy.deepcopy(rng.choice(HOSTILE))
    if roll < 0.75:
        return rng.choice([rng.uniform(-1e3, 1e3), 10.0 ** rng.uniform(-320, 308), rng.randint(-10, 10 ** 6)])
    if roll < 0.9:
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0x80, 0x2FFF), rng.randint(0x1F300, 0x1F64F)]))
                       for _ in range(rng.randint(0, 12)))
    return [random_value(rng) for _ in range(rng.randint(0, 4))]


def random_key(rng: random.Random, doc: dict | None = None) -> str:
    options = ["V", "lam", "m", "name", "rounds", "count", "sigma", "p_max", "variants", "sweep",
               "ünï", "漢字", "", " ", "a.b", "🙂", "scheduler", "run"]
    if doc:
        options.extend(doc)
    return rng.choice(options)


def leaves(doc, prefix=()):
    for k, v in doc.items():
        yield prefix + (k,), v
        if isinstance(v, dict):
            yield from leaves(v, prefix + (k,))


def get_parent(doc, path):
    node = doc
    for k in path[:-1]:
        node = node[k]
    return node


def mutate_doc(doc: dict, rng: random.Random) -> dict:
    import copy

    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        items = list(leaves(doc))
        op = rng.randrange(9)
        if not items:
            doc[random_key(rng)] = random_value(rng)
            continue
        path, value = rng.choice(items)
        parent = get_parent(doc, path)
        if op <= 2:  # replace a value (scalar or whole table)
            parent[path[-1]] = random_value(rng)
        elif op == 3:  # delete a key or a section
            del parent[path[-1]]
        elif op == 4:  # rename a key
            parent[random_key(rng, parent)] = parent.pop(path[-1])
        elif op == 5:  # add an unknown or duplicate-looking key
            target = parent if rng.random() < 0.5 or not isinstance(value, dict) else value
            target[random_key(rng, target)] = random_value(rng)
        elif op == 6:  # a nested table where a scalar belongs
            parent[path[-1]] = {random_key(rng): value}
        elif op == 7:  # variants / sweep with random content
            special = rng.choice(["variants", "sweep"])
            key = rng.choice(["scheduler.V", "scheduler.name", "devices.count", "name", "link.p_max", "x.y"])
            if special == "sweep":
                doc.setdefault("sweep", {})
                if isinstance(doc["sweep"], dict):
                    doc["sweep"][key] = rng.choice([[random_value(rng) for _ in range(rng.randint(0, 3))],
                                                    random_value(rng)])
            else:
                doc.setdefault("variants", {})
                if isinstance(doc["variants"], dict):
                    doc["variants"][random_key(rng)] = rng.choice([{key: random_value(rng)}, random_value(rng)])
        else:  # numbers at their extremes
            parent[path[-1]] = rng.choice([1e308, -1e308, 10 ** 30, -(10 ** 30), 0, -1, math.nan, math.inf,
                                           5e-324, 10 ** 400])
    return doc


def mutate_text(text: str, rng: random.Random) -> bytes:
    data = text.encode("utf-8")
    op = rng.randrange(8)
    lines = data.split(b"\n")
    if op == 0 and data:
        data = data[: rng.randrange(len(data))]
    elif op == 1 and lines:
        del lines[rng.randrange(len(lines))]
        data = b"\n".join(lines)
    elif op == 2 and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        data = b"\n".join(lines)
    elif op == 3 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        data = b"\n".join(lines)
    elif op == 4:
        pos = rng.randrange(len(data) + 1)
        data = data[:pos] + rng.choice([b"=", b"[", b"]", b"\"", b"'", b"\n", b"#", b"{", b",", b".", b"\x00",
                                        b"\xff", b"\xc3", "ü".encode(), b"[[x]]\n", b"inf", b"nan"]) + data[pos:]
    elif op == 5 and data:
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        data = bytes(buf)
    elif op == 6:
        data = rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b""]) + data
    else:
        data = data.replace(b"=", rng.choice([b":", b"==", b"= =", b"="]), 1)
    return data


def test_mutated_scenario_files(scratch):
    rng = random.Random(20240601 + SCALE)
    docs = seed_docs()
    texts = [p.read_text() for p in SCENARIO_FILES]
    failures, outcomes = [], []
    for i in range(600 * SCALE):
        if i % 3 == 2:  # text mutation of a real file
            content = mutate_text(rng.choice(texts), rng)
        else:
            mutated = mutate_doc(rng.choice(docs), rng)
            content = toml_doc(mutated)
            if i % 3 == 1:
                content = mutate_text(content, rng)
        outcomes.append(check_case(scratch, content, (), failures, f"mutation {i}"))
    # the unmutated files load
    for path in SCENARIO_FILES:
        outcomes.append(check_case(scratch, path.read_bytes(), (), failures, path.name))
        assert outcomes[-1] == "loaded", path
    report("mutated scenario files", outcomes, failures, 600 * SCALE)


# ---------------------------------------------------------------------------------------------
# 3. random TOML text and garbage


def random_toml(rng: random.Random) -> str:
    """Unstructured: random headers and key = value lines. Structured: the real sections with their
    own keys, mostly plausible values (so that some documents load), some hostile ones."""
    keys = field_paths()
    out = []
    if rng.random() < 0.5:
        sections: dict[str, list[str]] = {}
        for key in keys:
            if "." in key:
                section, name = key.split(".")
                sections.setdefault(section, []).append(name)
        out.append(f"[run]\nrounds = {rng.randint(1, 100)}")
        for section in rng.sample(sorted(sections), rng.randint(0, len(sections))):
            out.append(f"[{section}]" if section != "run" else "")
            for name in rng.sample(sections[section], rng.randint(0, min(4, len(sections[section])))):
                if name == "rounds":
                    continue
                plausible = rng.choice([1, 2, 10, 0.5, 1.0, 100.0, 0.001, True, False, "35 dB", [1.0, 2.0],
                                        "lyapunov", "uniform", "linear", "homogeneous", "exact", "tdma"])
                value = plausible if rng.random() < 0.8 else random_value(rng)
                out.append(f"{name} = {toml_val(value)}")
        return "\n".join(out) + "\n"
    headers = ["run", "channel", "link", "devices", "scheduler", "learning", "variants.a", "sweep",
               "variants", "x", "run.sub", "ü"]
    for _ in range(rng.randint(0, 12)):
        roll = rng.random()
        if roll < 0.2:
            out.append(f"[{rng.choice(headers)}]")
        elif roll < 0.25:
            out.append(f"[[{rng.choice(headers)}]]")
        elif roll < 0.85:
            key = rng.choice(keys)
            key = key.split(".")[-1] if rng.random() < 0.6 else key
            out.append(f"{key} = {toml_val(random_value(rng))}")
        elif roll < 0.9:
            out.append("# " + "".join(chr(rng.randint(32, 0x2FFF)) for _ in range(rng.randint(0, 10))))
        else:
            out.append("".join(rng.choice("=[]{}\"'.,#ab1 \t\\") for _ in range(rng.randint(1, 20))))
    return "\n".join(out) + rng.choice(["\n", "", "\r\n"])


def test_random_text_and_garbage(scratch):
    rng = random.Random(7 + SCALE)
    failures, outcomes = [], []
    fixed = [b"", b"\n", b"   \n\t\n", b"# only a comment\n", b"\xef\xbb\xbf[run]\nrounds = 1\n",
             "[run]\nrounds = 1\n".encode("utf-16"), b"\x00" * 100, b"\xff\xfe\xfd", b"[run]\nrounds = 1\n\x00",
             b"[run]\nrounds = 1\n[run]\nrounds = 2\n", b"[run]\nrounds = 1\nrounds = 2\n",
             b"x = " + b"[" * 50000 + b"]" * 50000, b"x = " + b"[" * 50000, b"x = " + b"{a = " * 20000,
             b"[" + b"a." * 20000 + b"a]\n", b"[run]\nrounds = " + b"9" * 5000 + b"\n",
             b"[run]\nrounds = 1\n[scheduler]\nV = " + b"9" * 5000 + b"\n",
             b"[run]\nrounds = 1\n[scheduler]\nV = 0x" + b"f" * 5000 + b"\n",
             b"[run]\nrounds = 1\nname = \"" + b"x" * 1_000_000 + b"\"\n"]
    for content in fixed:
        outcomes.append(check_case(scratch, content, (), failures, "fixed"))
    for i in range(500 * SCALE):
        if i % 5 == 0:
            content = bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))
        else:
            content = random_toml(rng)
        outcomes.append(check_case(scratch, content, (), failures, f"random {i}"))
    # a file that is not there, and a directory
    with pytest.raises(ConfigError):
        load_scenario(scratch / "missing.toml")
    with pytest.raises(ConfigError):
        load_scenario(scratch)
    outcomes.extend(["error", "error"])
    report("random text and garbage", outcomes, failures, 500 * SCALE)


# ---------------------------------------------------------------------------------------------
# 4. overrides (--set KEY=VALUE)


def test_fuzzed_overrides(scratch):
    rng = random.Random(99 + SCALE)
    base = (ROOT / "scenarios" / "paper" / "timing.toml").read_bytes()
    paths = field_paths() + ["variants.a.scheduler.V", "sweep.scheduler.V", "run", "x.y", "a..b", ".a", "a."]
    failures, outcomes = [], []
    for i in range(500 * SCALE):
        roll = rng.random()
        if roll < 0.7:
            text = toml_val(random_value(rng)) if rng.random() < 0.8 else "".join(
                chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 15)))
            item = f"{rng.choice(paths)}={text}"
        elif roll < 0.8:
            item = f"{rng.choice(paths)}=" + "[" * rng.choice([1, 10, 5000])
        else:
            item = "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 30)))
        overrides = [item] if rng.random() < 0.8 else [item, f"{rng.choice(paths)}={toml_val(random_value(rng))}"]
        outcomes.append(check_case(scratch, base, overrides, failures, f"override {i}"))
    report("overrides", outcomes, failures, 500 * SCALE)


@pytest.mark.slow
def test_fuzz_at_ten_times_the_scale(scratch, monkeypatch):
    """The random parts again with 10x the inputs and other seeds (about 25 000 inputs)."""
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 10)
    for seed_test in (test_mutated_scenario_files, test_random_text_and_garbage, test_fuzzed_overrides):
        seed_test(scratch)
