"""PyG reference for benches/gat.rs: one training step of PyG's examples/gat.py model on Cora.

GATConv(1433 -> 8, heads=8, dropout=0.6) concatenated, ELU,
GATConv(64 -> 7, heads=1, concat=False, dropout=0.6); dropout 0.6 on both
layers' inputs; cross-entropy on the 140 public training nodes; Adam (lr
0.005, weight decay 5e-4). A step is zero_grad, forward, backward and the
Adam update, in training mode, float32, on 2 threads, with the dense
features PyG's Planetoid loader gives (row-normalised as gat.py does).
`--model gatv2` times the same with GATv2Conv.

Usage: python benches/reference/pyg_gat_step.py DATA_ROOT [--model gat|gatv2] [--steps 50]
(DATA_ROOT holds planetoid/ind.cora.*). Prints one JSON line:
{"model", "n", "e", "threads", "step_ms" (median after 3 warm-up steps),
"step_ms_all"}.
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.datasets import Planetoid
from torch_geometric.nn import GATConv, GATv2Conv


class GAT(torch.nn.Module):
    def __init__(self, conv, in_channels, hidden, out_channels, heads):
        super().__init__()
        self.conv1 = conv(in_channels, hidden, heads, dropout=0.6)
        self.conv2 = conv(hidden * heads, out_channels, heads=1, concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        return self.conv2(x, edge_index)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_root")
    ap.add_argument("--model", default="gat", choices=["gat", "gatv2"])
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    src = os.path.abspath(os.path.join(args.data_root, "planetoid"))
    with tempfile.TemporaryDirectory() as root:
        raw = os.path.join(root, "Cora", "raw")
        os.makedirs(raw)
        for f in os.listdir(src):
            if f.startswith("ind.cora."):
                os.symlink(os.path.join(src, f), os.path.join(raw, f))
        data = Planetoid(root, "Cora", transform=T.NormalizeFeatures())[0]
    conv = GATConv if args.model == "gat" else GATv2Conv
    model = GAT(conv, data.num_features, 8, int(data.y.max()) + 1, 8)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    model.train()
    times = []
    for _ in range(args.steps + 3):
        t = time.perf_counter()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({
        "model": args.model,
        "n": data.num_nodes,
        "e": data.num_edges,
        "threads": torch.get_num_threads(),
        "step_ms": float(np.median(times[3:])),
        "step_ms_all": times[3:],
    }))


if __name__ == "__main__":
    main()
