"""JUnit XML reports for CI systems: one ``<testsuite>`` per spec file, one ``<testcase>`` per property.

How a verdict becomes a test case (after the property's ``expect:`` is applied, see ``report.outcome``):

* counts as proved (proved, or the expected verdict)   -> passed (the verdict is in ``<system-out>``)
* counts as refuted (a refutation, or a definite verdict contradicting ``expect``) -> ``<failure>`` whose
  message is the witness summary and whose body is the witness JSON
* unknown                                              -> ``<skipped>`` (default) or ``<error>``
  (``unknown_as="error"``), the message saying what was tried
* skipped (an optional package missing: not run here)  -> ``<skipped>``, the message naming the package and how
  to install it (``unknown_as`` does not apply: nothing ran)
* error                                                -> ``<error>`` with the engine's message
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from ..verdict import ERROR, PROVED, REFUTED, SKIPPED, UNKNOWN, Verdict
from .report import outcome

UNKNOWN_AS = ("skipped", "error")


def _suite_name(spec: str) -> str:
    return Path(spec).as_posix() if spec else "verify-tf"


def _classname(spec: str) -> str:
    """``specs/model.yaml`` -> ``specs.model`` (CI tools group test cases by dotted class names)."""
    if not spec:
        return "verify-tf"
    path = Path(spec)
    return ".".join([*path.parent.parts, path.stem]).lstrip("./") or path.stem


def _witness_text(verdict: Verdict) -> str:
    return json.dumps(verdict.counterexample, indent=2, default=str) if verdict.counterexample else ""


def _message(verdict: Verdict, expect: str | None) -> str:
    counted = outcome(verdict, expect)
    cached = " (cached)" if verdict.cached else ""  # served from the proof cache: docs/ci.md
    reading = f" ({verdict.stated_reading})" if verdict.stated_reading else ""  # docs/semantics.md, "Readings"
    if verdict.status == REFUTED and counted == REFUTED:
        summary = (verdict.counterexample or {}).get("summary") or verdict.detail
        return f"refuted{reading}{cached}{f' (expected {expect})' if expect else ''}: {summary}"
    if counted == REFUTED:  # proved, but the property expected refuted
        return f"expected {expect}, got {verdict.label}{cached}: {verdict.detail}"
    if verdict.status == UNKNOWN:
        tried = f" (tried: {'; '.join(verdict.tried)})" if verdict.tried else ""
        return f"unknown{reading}: {verdict.detail}{tried}"
    if verdict.status == SKIPPED:
        return f"{verdict.label}: {verdict.detail}"
    return f"{verdict.label}: {verdict.detail}"


def _reading_properties(case: ET.Element, verdict: Verdict) -> None:
    """The reading and an imported model's weight rounding, as the test case's properties (only when stated)."""
    items = {"reading": verdict.stated_reading} if verdict.stated_reading else {}
    for key, value in (verdict.quantization or {}).items():
        items[f"quantization.{key}"] = str(value)
    if items:
        properties = ET.SubElement(case, "properties")
        for name, value in items.items():
            ET.SubElement(properties, "property", name=name, value=value)


def junit_xml(verdicts: Sequence[Verdict], expectations: Sequence[str | None], unknown_as: str = "skipped") -> str:
    if unknown_as not in UNKNOWN_AS:
        raise ValueError(f"unknown_as must be one of {UNKNOWN_AS}")
    suites: OrderedDict[str, list[tuple[Verdict, str | None]]] = OrderedDict()
    for verdict, expect in zip(verdicts, expectations):
        suites.setdefault(verdict.spec, []).append((verdict, expect))
    root = ET.Element("testsuites", name="verify-tf")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for spec, entries in suites.items():
        suite = ET.SubElement(root, "testsuite", name=_suite_name(spec))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        suite_time = 0.0
        for verdict, expect in entries:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"{verdict.property} [{verdict.index}]",
                classname=_classname(spec),
                time=f"{verdict.seconds:.3f}",
            )
            _reading_properties(case, verdict)
            counts["tests"] += 1
            suite_time += verdict.seconds
            counted = outcome(verdict, expect)
            message = _message(verdict, expect)
            if counted == REFUTED:
                failure = ET.SubElement(case, "failure", message=message, type=verdict.status)
                failure.text = _witness_text(verdict) or verdict.detail
                counts["failures"] += 1
            elif counted == ERROR or (counted == UNKNOWN and unknown_as == "error"):
                error = ET.SubElement(case, "error", message=message, type=verdict.status)
                error.text = verdict.traceback or verdict.detail
                counts["errors"] += 1
            elif counted in (UNKNOWN, SKIPPED):
                ET.SubElement(case, "skipped", message=message)
                counts["skipped"] += 1
            else:
                assert counted == PROVED
                note = f"{verdict.label} with engine {verdict.engine}: {verdict.detail}"
                if expect is not None:
                    note += f" (expected {expect})"
                if verdict.cached:
                    note += " (cached)"
                ET.SubElement(case, "system-out").text = note
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{suite_time:.3f}")
        total_time += suite_time
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: str | Path, verdicts: Sequence[Verdict], expectations: Sequence[str | None], unknown_as: str = "skipped"
) -> None:
    Path(path).write_text(junit_xml(verdicts, expectations, unknown_as), encoding="utf-8")
