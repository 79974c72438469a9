"""--junit: JUnit XML for CI systems. One test case per compared pair and output (its iterations together),
one per failed backend; a failure carries the one-line summaries of the failing iterations."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from cmpx.outputs import write_file
from cmpx.printable import xml_safe

if TYPE_CHECKING:
    from cmpx.outcome.report_data import ReportData


def junit_tree(report: ReportData) -> ET.ElementTree:
    result = report.result
    cases: dict[tuple[str, str, str], list[tuple[int, bool, list[str]]]] = {}
    for pair in result.pairs:
        for output in pair.outputs:
            lines = [output.note] if output.failed_early else [
                f"{m.metric} {'PASSED' if m.passed else 'FAILED'}: {m.summary} [{m.criterion}]" for m in output.metrics]
            cases.setdefault((pair.backend, pair.reference, output.output), []).append(
                (pair.iteration, output.passed, lines))
    suite = ET.Element("testsuite", name="cmpx", tests="0", failures="0", errors="0")
    failures = errors = 0
    for (backend, reference, output_name), runs in cases.items():
        case = ET.SubElement(suite, "testcase", classname=f"{backend} vs {reference}", name=output_name)
        failed = [(i, lines) for i, ok, lines in runs if not ok]
        if failed:
            failures += 1
            first = failed[0][1][0] if failed[0][1] else ""
            message = f"{output_name}: {len(failed)}/{len(runs)} iteration(s) failed; first: {first}"
            element = ET.SubElement(case, "failure", message=message)
            element.text = "\n".join(f"iteration {i}: {line}" for i, lines in failed for line in lines)
    for name, error in result.failures.items():
        errors += 1
        case = ET.SubElement(suite, "testcase", classname="backends", name=name)
        element = ET.SubElement(case, "error", message=str(error))
        element.text = getattr(error, "stderr_tail", "") or (str(error.__cause__) if error.__cause__ else "")
    for finding in result.non_finite:
        failures += 1
        case = ET.SubElement(suite, "testcase", classname="validate", name=f"{finding.backend} {finding.output}")
        ET.SubElement(case, "failure", message=str(finding))
    if report.interrupted:  # what finished is above; CI must not read it as the whole run
        errors += 1
        case = ET.SubElement(suite, "testcase", classname="run", name="interrupted")
        ET.SubElement(case, "error", message=f"the run was interrupted after {result.iterations} iteration(s); the "
                                             "cases above are what finished")
    if report.stopped is not None:  # likewise: the data stopped the run
        errors += 1
        case = ET.SubElement(suite, "testcase", classname="run", name="stopped")
        ET.SubElement(case, "error", message=f"the run stopped after {result.iterations} iteration(s): "
                                             f"{report.stopped}")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites")
    root.append(xml_safe(suite))  # names from the model: what XML 1.0 cannot hold is escaped
    return ET.ElementTree(root)


def write_junit_report(path: str, report: ReportData) -> None:
    tree = junit_tree(report)
    ET.indent(tree)
    write_file("--junit", path, lambda f: tree.write(f, encoding="utf-8", xml_declaration=True), mode="wb")
