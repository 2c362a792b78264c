"""PyG reference of benches/conv_step.rs: one full-batch training step
(forward, cross-entropy on the public training nodes, backward, Adam) of
the planetoid example's models on Cora, float32, 2 threads.

  --layer sage   two SAGEConv (mean), hidden 16, dropout 0.5
  --layer gin    two GINConv(MLP([in, 64, 64]) / MLP([64, 64, 7]), norm=None),
                 dropout 0.5
  --layer gcnii  examples/gcn2_cora.py's Net: 64 GCN2Conv layers, hidden 64,
                 alpha 0.1, theta 0.5, dropout 0.6, cached GCN normalisation
  --layer appnp  benchmark/citation/appnp.py's Net: hidden 64, K 10, alpha 0.1

Reads the vendored raw Planetoid files (data/planetoid/ind.cora.*) with
torch_geometric.io.read_planetoid_data, row-normalises the features (PyG's
NormalizeFeatures), and prints one JSON line: {layer, step_ms (median of
--steps steps after 3 warm-ups), threads, torch, torch_geometric}.

  python benches/reference/pyg_conv_step.py --layer sage --steps 50
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch_geometric
from torch_geometric.io import read_planetoid_data
from torch_geometric.nn import APPNP, GCN2Conv, GINConv, MLP, SAGEConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class Sage(torch.nn.Module):
    def __init__(self, d, c):
        super().__init__()
        self.conv1, self.conv2 = SAGEConv(d, 16), SAGEConv(16, c)

    def forward(self, x, ei, ew):
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x, ei))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, ei)


class Gin(torch.nn.Module):
    def __init__(self, d, c):
        super().__init__()
        self.conv1 = GINConv(MLP([d, 64, 64], norm=None))
        self.conv2 = GINConv(MLP([64, 64, c], norm=None))

    def forward(self, x, ei, ew):
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x, ei))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, ei)


class Gcnii(torch.nn.Module):
    """examples/gcn2_cora.py (normalize=False on the pre-normalised graph)."""

    def __init__(self, d, c, layers=64, hidden=64, alpha=0.1, theta=0.5, dropout=0.6):
        super().__init__()
        self.lins = torch.nn.ModuleList([torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, c)])
        self.convs = torch.nn.ModuleList(
            [GCN2Conv(hidden, alpha, theta, layer + 1, shared_weights=True, normalize=False)
             for layer in range(layers)])
        self.dropout = dropout

    def forward(self, x, ei, ew):
        x = F.dropout(x, self.dropout, training=self.training)
        x = x_0 = self.lins[0](x).relu()
        for conv in self.convs:
            x = F.dropout(x, self.dropout, training=self.training)
            x = conv(x, x_0, ei, ew).relu()
        x = F.dropout(x, self.dropout, training=self.training)
        return self.lins[1](x)


class Appnp(torch.nn.Module):
    """benchmark/citation/appnp.py."""

    def __init__(self, d, c):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(d, 64), torch.nn.Linear(64, c)
        self.prop1 = APPNP(10, 0.1, cached=True)

    def forward(self, x, ei, ew):
        x = F.dropout(x, 0.5, training=self.training)
        x = F.relu(self.lin1(x))
        x = F.dropout(x, 0.5, training=self.training)
        return self.prop1(self.lin2(x), ei)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layer", choices=["sage", "gin", "gcnii", "appnp"], required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    data = read_planetoid_data(os.path.join(ROOT, "data", "planetoid"), "cora")
    x = data.x / data.x.sum(dim=-1, keepdim=True).clamp(min=1)
    ei, ew = data.edge_index, None
    d, c = x.size(1), int(data.y.max()) + 1
    if args.layer == "gcnii":
        ei, ew = gcn_norm(ei, None, x.size(0), add_self_loops=True)
        model = Gcnii(d, c)
        opt = torch.optim.Adam([
            dict(params=model.convs.parameters(), weight_decay=0.01),
            dict(params=model.lins.parameters(), weight_decay=5e-4),
        ], lr=0.01)
    else:
        model = {"sage": Sage, "gin": Gin, "appnp": Appnp}[args.layer](d, c)
        opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    model.train()
    mask = data.train_mask
    ts = []
    for _ in range(args.steps + 3):
        t = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei, ew)[mask], data.y[mask])
        loss.backward()
        opt.step()
        ts.append(time.perf_counter() - t)
    print(json.dumps({
        "layer": args.layer,
        "step_ms": float(np.median(ts[3:]) * 1e3),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
    }))


if __name__ == "__main__":
    main()
