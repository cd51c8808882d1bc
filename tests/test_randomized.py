"""Randomized positions (Ruoss et al. 2023): training positions are a sorted subset of [0, L_max), distinct, the
same for every layer of a forward and the same for the same seed; evaluation uses 0 … n-1; L_max is recorded."""

import torch

from extrapolate.core.config import ModelConfig
from extrapolate.encodings import Rotary, build_encoding
from extrapolate.encodings.randomized import PositionDraws, draw_generator, random_positions
from extrapolate.model import TransformerLM


def test_draw_is_sorted_unique_and_below_max():
    for seed in range(20):
        pos = random_positions(256, 2048, draw_generator(seed, 0))
        assert pos.shape == (256,) and pos.dtype == torch.int64
        assert (pos.diff() > 0).all()  # sorted and distinct
        assert pos.min() >= 0 and pos.max() < 2048
    assert torch.equal(random_positions(8, 8, draw_generator(0, 0)), torch.arange(8))  # T = L_max: every position


def test_same_seed_same_draws_and_draws_differ():
    a, b, c = PositionDraws(1024, seed=3), PositionDraws(1024, seed=3), PositionDraws(1024, seed=4)
    pos = torch.arange(64)
    first_a, first_b, first_c = a.next(pos), b.next(pos), c.next(pos)
    assert torch.equal(first_a, first_b) and not torch.equal(first_a, first_c)
    assert not torch.equal(a.next(pos), first_a)  # the next forward draws anew
    # a resumed model (its buffers loaded) continues with the draw an uninterrupted one would make
    resumed = PositionDraws(1024, seed=0)
    resumed.load_state_dict(b.state_dict())
    assert torch.equal(resumed.next(pos), b.next(pos))


def model_for(name):
    torch.manual_seed(5)  # training seeds torch before building: the draws' seed comes from it
    config = ModelConfig(vocab_size=50, d_model=32, n_layers=3, n_heads=2, encoding=name, max_len=16)
    return TransformerLM(config)


def test_rope_randomized_training_positions_shared_by_layers_and_plain_in_evaluation(monkeypatch):
    from extrapolate.encodings.randomized import RandomizedRotary

    seen = []
    original = RandomizedRotary.rotate

    def spy(self, q, k, pos, seq_len=None):
        seen.append(pos.clone())
        return original(self, q, k, pos, seq_len)

    monkeypatch.setattr(RandomizedRotary, "rotate", spy)
    model = model_for("rope-randomized")
    assert model.encoding.describe()["max_position"] == 8 * 16  # L_max = 8 × the training length
    tokens = torch.randint(0, 50, (2, 16))
    model.train()
    model(tokens)
    assert len(seen) == 3 and all(torch.equal(p, seen[0]) for p in seen)  # one draw for every layer
    assert not torch.equal(seen[0], torch.arange(16)) and seen[0].max() < 128
    model.eval()
    seen.clear()
    with torch.no_grad():
        model(tokens)
    assert all(torch.equal(p, torch.arange(16)) for p in seen)
    # the same seed gives the same first draw in a new model
    first_draws = []
    for _ in range(2):
        seen.clear()
        model_for("rope-randomized").train()(tokens)
        first_draws.append(seen[0])
    assert torch.equal(first_draws[0], first_draws[1])


def test_rope_randomized_rotation_equals_rope_at_the_drawn_positions():
    torch.manual_seed(0)
    encoding = build_encoding("rope-randomized", d_model=32, n_heads=2, head_dim=16, max_len=16).train()
    q, k = torch.randn(2, 1, 2, 16, 16).unbind(0)
    pos = encoding.positions(torch.arange(16))
    ours = encoding.rotate(q, k, pos)
    plain = Rotary(16).rotate(q, k, pos)
    assert torch.allclose(ours[0], plain[0]) and torch.allclose(ours[1], plain[1])


def test_sinusoidal_randomized_embeds_the_drawn_positions():
    from extrapolate.encodings import sinusoidal_table

    encoding = build_encoding("sinusoidal-randomized", d_model=8, n_heads=2, head_dim=4, max_len=16)
    x = torch.zeros(1, 16, 8)
    encoding.train()
    pos = encoding.positions(torch.arange(16))
    assert torch.allclose(encoding.embed(x, pos)[0], 8**-0.5 * sinusoidal_table(pos, 8))
    encoding.eval()
    assert torch.equal(encoding.positions(torch.arange(16)), torch.arange(16))
    assert encoding.describe() == {"max_position": 128, "train_positions": "random"}
