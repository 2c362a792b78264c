"""GCNII on Cora's full-supervised geom-gcn splits in PyTorch Geometric: the accuracy anchor for
`planetoid --config configs/planetoid/cora-gcnii.toml` (issue 69, item 5).

Usage: python benches/reference/pyg_gcnii_full.py [--data DIR] [--splits 0,1,...] [--threads 1]
         [--alpha 0.1] [--theta 0.5] [--dropout 0.6] [--wd-conv 0.01] [--wd-lin 5e-4]
         [--epochs 1000] [--patience 100] [--select acc|loss]
DIR holds planetoid/ind.cora.* and geom-gcn-splits/cora_split_0.6_0.2_{r}.npz (../shared/data).
Prints one JSON line per split, then one summary line (mean and population std, as the crate's
records).

The model and optimiser are PyG's examples/gcn2_cora.py, unchanged: dropout(x) -> relu(Linear) = x0
-> 64 x [dropout -> GCN2Conv(alpha, theta, layer l, shared weights) -> relu] -> dropout -> Linear;
Adam 0.01, weight decay --wd-conv on the convolutions and --wd-lin on the linear layers; Â is
gcn_norm with self-loops, features row-normalised (NormalizeFeatures). The loop is the crate's
full-supervised protocol: --epochs epochs at most, stop after --patience epochs without a better
validation epoch, the best one kept (--select acc: highest validation accuracy, ties to the lower
validation loss, as the crate's `select_by = "accuracy"`; --select loss: lowest validation loss, as
GCNII's own full-supervised.py), test accuracy read at that epoch.

GCNII's paper's full-supervised Cora command (its code's full.sh) is `--layer 64 --alpha 0.2
--weight_decay 1e-4` with dropout 0.5, lambda (theta) 0.5, 1500 epochs, patience 100, one weight
decay for every parameter and selection by validation loss: here `--alpha 0.2 --dropout 0.5
--wd-conv 1e-4 --wd-lin 1e-4 --epochs 1500 --select loss`.
"""
import argparse, json, os, pickle, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch, torch.nn.functional as F
from torch_geometric.nn import GCN2Conv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

p = argparse.ArgumentParser()
p.add_argument("--data", default=os.environ.get("HDGCN_DATA", "../shared/data"))
p.add_argument("--splits", default="0,1,2,3,4,5,6,7,8,9")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--layers", type=int, default=64); p.add_argument("--hidden", type=int, default=64)
p.add_argument("--alpha", type=float, default=0.1); p.add_argument("--theta", type=float, default=0.5)
p.add_argument("--dropout", type=float, default=0.6)
p.add_argument("--wd-conv", type=float, default=0.01); p.add_argument("--wd-lin", type=float, default=5e-4)
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--epochs", type=int, default=1000); p.add_argument("--patience", type=int, default=100)
p.add_argument("--select", default="acc", choices=["acc", "loss"])
a = p.parse_args()
torch.set_num_threads(a.threads)

# ---- Cora, as Planetoid's loader assembles it ----
def load(name):
    with open(f"{a.data}/planetoid/ind.cora.{name}", "rb") as f:
        return pickle.load(f, encoding="latin1")
x, tx, allx, y, ty, ally, graph = (load(n) for n in ["x", "tx", "allx", "y", "ty", "ally", "graph"])
test_idx = [int(l) for l in open(f"{a.data}/planetoid/ind.cora.test.index")]
feats = np.vstack([allx.toarray(), tx.toarray()]).astype(np.float32)
labels = np.vstack([ally, ty]).argmax(1)
order = np.sort(test_idx)
feats[test_idx], labels[test_idx] = feats[order].copy(), labels[order].copy()
n = feats.shape[0]
feats = feats / np.maximum(feats.sum(1, keepdims=True), 1e-12)          # NormalizeFeatures
edges = {(u, v) for u, vs in graph.items() for v in vs if u != v}
edges |= {(v, u) for u, v in edges}
ei = torch.tensor(sorted(edges), dtype=torch.long).T
ei, ew = gcn_norm(ei, None, n, add_self_loops=True)
X = torch.from_numpy(feats); Y = torch.from_numpy(labels)
classes = int(Y.max()) + 1


class Net(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.lins = torch.nn.ModuleList([torch.nn.Linear(X.shape[1], a.hidden), torch.nn.Linear(a.hidden, classes)])
        s.convs = torch.nn.ModuleList([GCN2Conv(a.hidden, a.alpha, a.theta, l + 1, shared_weights=True,
                                                normalize=False) for l in range(a.layers)])

    def forward(s, x):
        x = F.dropout(x, a.dropout, training=s.training)
        x = x0 = s.lins[0](x).relu()
        for conv in s.convs:
            x = F.dropout(x, a.dropout, training=s.training)
            x = conv(x, x0, ei, ew).relu()
        x = F.dropout(x, a.dropout, training=s.training)
        return s.lins[1](x).log_softmax(-1)


accs = []
for r in [int(v) for v in a.splits.split(",")]:
    torch.manual_seed(r)
    m = np.load(f"{a.data}/geom-gcn-splits/cora_split_0.6_0.2_{r}.npz")
    tr, va, te = (torch.from_numpy(m[k].astype(bool)) for k in ["train_mask", "val_mask", "test_mask"])
    model = Net()
    opt = torch.optim.Adam([dict(params=model.convs.parameters(), weight_decay=a.wd_conv),
                            dict(params=model.lins.parameters(), weight_decay=a.wd_lin)], lr=a.lr)
    best, since, t0 = None, 0, time.time()
    for epoch in range(a.epochs):
        model.train(); opt.zero_grad()
        F.nll_loss(model(X)[tr], Y[tr]).backward(); opt.step()
        model.eval()
        with torch.no_grad():
            out = model(X)
        vl = float(F.nll_loss(out[va], Y[va]))
        pred = out.argmax(1)
        va_acc = float((pred[va] == Y[va]).float().mean()) * 100
        te_acc = float((pred[te] == Y[te]).float().mean()) * 100
        if a.select == "acc":
            better = best is None or va_acc > best[0] or (va_acc == best[0] and vl < best[1])
        else:
            better = best is None or vl < best[1] or (vl == best[1] and va_acc > best[0])
        if better:
            best, since = (va_acc, vl, te_acc, epoch), 0
        else:
            since += 1
            if since >= a.patience:
                break
    accs.append(best[2])
    print(json.dumps({"split": r, "val_acc": best[0], "val_loss": best[1], "test_acc": best[2],
                      "best_epoch": best[3], "epochs_run": epoch + 1, "seconds": time.time() - t0}), flush=True)
print(json.dumps({"settings": vars(a), "test_acc_mean": statistics.mean(accs),
                  "test_acc_std": statistics.pstdev(accs), "runs": len(accs),
                  "torch": torch.__version__}))
