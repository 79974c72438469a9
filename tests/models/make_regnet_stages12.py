"""Regenerate regnet_stages12.onnx (committed, 66 KB): the stem and the first two stages (37 nodes: Conv,
BatchNormalization, Relu, residual Add, group convolutions) of the RegNet the real-model corpus exports from
torchvision with BatchNormalization kept and random weights (its make_corpus.py writes it as cnn.onnx), cut with
cmpx's own subgraph writer. A real exported architecture small enough to commit, for the fp16 cases.

    python tests/models/make_regnet_stages12.py PATH/TO/cnn.onnx
"""

import os
import sys

import numpy as np

from cmpx.model.graph import load_structure
from cmpx.model.subgraph import boundary, index_graph, write_subgraph


def main(source: str) -> None:
    index = index_graph(load_structure(source))
    end = next(i for i, node in enumerate(index.nodes) if "block3" in node.name)
    nodes = list(range(end))
    inputs, outputs = boundary(index, nodes)
    assert inputs == ["input"], inputs
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regnet_stages12.onnx")
    write_subgraph(index, source, nodes, {"input": (np.dtype("float32"), ("batch", 3, 32, 32))}, outputs, target)


if __name__ == "__main__":
    main(sys.argv[1])
