"""The LM: a cut forward equals the full model's hidden states at that layer, and runs
exactly that many layers (Bert and DeBERTa-v2); local folders are read from safetensors
only."""

from __future__ import annotations

import pytest
import torch

from graphpipe.train.text.lm import LMEncoder, build_lm


@pytest.mark.parametrize("kind", ["bert", "deberta"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_cut_forward_equals_hidden_states(kind: str, depth: int) -> None:
    torch.manual_seed(0)
    model = build_lm(kind, vocab_size=60, hidden=32, layers=3, heads=2, max_len=16).eval()
    enc = LMEncoder(model)
    calls: list[int] = []
    hooks = [layer.register_forward_hook(lambda *a, i=i: calls.append(i))
             for i, layer in enumerate(enc.layers)]
    ids = torch.randint(5, 60, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    got = enc(ids, mask, depth=depth)
    assert calls == list(range(depth))
    for h in hooks:
        h.remove()
    states = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    w = mask.unsqueeze(-1).float()
    torch.testing.assert_close(got, (states[depth] * w).sum(1) / w.sum(1), atol=1e-5, rtol=1e-5)
    assert len(enc.layers) == 3   # the layer list is restored
    with pytest.raises(ValueError, match="depth"):
        enc(ids, mask, depth=4)


def test_local_folder_is_safetensors_only(tmp_path) -> None:
    model = build_lm("bert", vocab_size=40, hidden=16, layers=2, heads=2, max_len=8)
    model.save_pretrained(tmp_path / "lm", safe_serialization=True)
    loaded = build_lm(path=tmp_path / "lm", vocab_size=0)
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)
    (tmp_path / "lm" / "model.safetensors").rename(tmp_path / "lm" / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pickled .bin weights are not read"):
        build_lm(path=tmp_path / "lm", vocab_size=0)
