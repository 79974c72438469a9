#!/usr/bin/env bash
# Regenerate docs/report.png, the picture of an HTML report in docs/reports.md: the shipped example on its fp16 graph against
# fp32, every tensor compared, rendered by headless Chromium. Usage, from the repository root, with the README's
# .venv and Debian's chromium package installed:  bash scripts/report-screenshot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmpx="$PWD/.venv/bin/cmpx"
cp examples/models/conv.onnx "$work/"  # run in $work: the page's "run it again" line shows no temporary path
(cd "$work" && "$cmpx" run conv.onnx --backend onnxrt:fp16 --backend onnxrt --mark-all -q \
    --report-html report.html >/dev/null) || test $? = 1  # fp16 fails the fp32 default tolerances
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
    --window-size=1280,1400 --screenshot=docs/report.png "file://$work/report.html" 2>/dev/null
echo "wrote docs/report.png"
