# GraphSAGE on ogbn-products with PyG's NeighborLoader: a PyG user's script.
#
# Written for graphpipe's drop-in documentation (docs/dropin.md) in the structure of
# PyG's examples/ogbn_products_sage.py (the same dataset, model, loaders, schedule and
# layer-wise inference); it is not a copy of that file. `pyg_products_sage.py` is this
# script ported to a graphpipe store; `pyg_products_sage.diff` is the difference.

import itertools
import os.path as osp

import torch
import torch.nn.functional as F
from ogb.nodeproppred import Evaluator
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv
from tqdm import tqdm

from graphpipe import GraphStore, to_pyg_backend

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
root = osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data', 'products')
dataset = GraphStore.open(root)
split_idx = {k: torch.from_numpy(dataset.split(k)) for k in dataset.split_names}
evaluator = Evaluator(name='ogbn-products')
data = to_pyg_backend(dataset)

train_idx = split_idx['train']
train_loader = NeighborLoader(data, input_nodes=train_idx,
                              num_neighbors=[15, 10, 5], batch_size=1024,
                              shuffle=True, num_workers=2)
subgraph_loader = NeighborLoader(data, input_nodes=torch.arange(data.num_nodes), num_neighbors=[-1],
                                 batch_size=4096, num_workers=2)


class SAGE(torch.nn.Module):
    def __init__(self, in_dim, hidden_dim, out_dim, num_layers):
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.convs = torch.nn.ModuleList(
            SAGEConv(a, b) for a, b in itertools.pairwise(dims))

    def reset_parameters(self):
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(x.relu(), p=0.5, training=self.training)
        return x.log_softmax(dim=-1)

    @torch.no_grad()
    def inference(self, x_all):
        # One layer at a time over all nodes, each with all of its in-neighbours:
        # batches come in node order, so out[:batch_size] of each batch, concatenated,
        # is the next layer's input for every node.
        bar = tqdm(total=x_all.size(0) * len(self.convs), desc='Evaluating')
        for i, conv in enumerate(self.convs):
            outs = []
            for batch in subgraph_loader:
                x = x_all[batch.n_id].to(device)
                x = conv(x, batch.edge_index.to(device))[:batch.batch_size]
                if i < len(self.convs) - 1:
                    x = x.relu()
                outs.append(x.cpu())
                bar.update(batch.batch_size)
            x_all = torch.cat(outs, dim=0)
        bar.close()
        return x_all


model = SAGE(data.num_features, 256, data.num_classes, num_layers=3)
model = model.to(device)


def train(epoch):
    model.train()
    bar = tqdm(total=train_idx.size(0), desc=f'Epoch {epoch:02d}')
    total_loss = total_correct = 0
    for batch in train_loader:
        batch = batch.to(device)
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        y = batch.y[:batch.batch_size].view(-1)
        loss = F.nll_loss(out, y)
        loss.backward()
        optimizer.step()
        total_loss += float(loss)
        total_correct += int((out.argmax(dim=-1) == y).sum())
        bar.update(batch.batch_size)
    bar.close()
    return total_loss / len(train_loader), total_correct / train_idx.size(0)


@torch.no_grad()
def test():
    model.eval()
    y_pred = model.inference(data.x).argmax(dim=-1, keepdim=True)
    y_true = data.y.view(-1, 1)
    return [evaluator.eval({'y_true': y_true[split_idx[name]],
                            'y_pred': y_pred[split_idx[name]]})['acc']
            for name in ('train', 'valid', 'test')]


test_accs = []
for run in range(1, 11):
    print(f'\nRun {run:02d}:\n')
    model.reset_parameters()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    best_val_acc = final_test_acc = 0
    for epoch in range(1, 21):
        loss, acc = train(epoch)
        print(f'Epoch {epoch:02d}, Loss: {loss:.4f}, Approx. Train: {acc:.4f}')
        if epoch > 5:
            train_acc, val_acc, test_acc = test()
            print(f'Train: {train_acc:.4f}, Val: {val_acc:.4f}, '
                  f'Test: {test_acc:.4f}')
            if val_acc > best_val_acc:
                best_val_acc, final_test_acc = val_acc, test_acc
    test_accs.append(final_test_acc)

test_acc = torch.tensor(test_accs)
print('============================')
print(f'Final Test: {test_acc.mean():.4f} ± {test_acc.std():.4f}')
