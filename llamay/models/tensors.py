"""The GGUF tensors of a model: one table of names and shapes, for reading and for writing.

As in llama.cpp (LLM_TENSOR_NAMES), every architecture uses the same names for the same roles;
a family only overrides a name where its files differ (Family.tensor_names). Which roles a layer
has follows from its family and its block (pre- or post-norms, q/k norms, fused projections).
spec.py looks tensors up here and checks their shapes; synthetic.py writes exactly these
tensors, so a synthetic file of a family holds what a real one does.

Shapes are numpy order (rows first: a matrix is outputs x inputs; the experts of a
mixture-of-experts FFN are one tensor of n_expert matrices, each stored whole), in symbols that
`Dims` resolves: the GGUF shape is the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass

from llamay.models.family import Family


@dataclass(frozen=True)
class Role:
    """A tensor's job: its name pattern ({il} for the layer) and its shape in symbols."""

    name: str
    shape: tuple[str, ...]

    @property
    def is_matrix(self) -> bool:
        return len(self.shape) == 2

    @property
    def is_experts(self) -> bool:
        return len(self.shape) == 3


ROLES: dict[str, Role] = {
    "token_embd": Role("token_embd", ("n_vocab", "n_embd")),
    "output_norm": Role("output_norm", ("n_embd",)),
    "output": Role("output", ("n_vocab", "n_embd")),
    "rope_freqs": Role("rope_freqs", ("n_rot_half",)),
    # encoders (BERT): token types, learned positions, the embeddings' norm, a reranker's head
    "token_types": Role("token_types", ("n_token_types", "n_embd")),
    "position_embd": Role("position_embd", ("n_pos", "n_embd")),
    "token_embd_norm": Role("token_embd_norm", ("n_embd",)),
    "cls": Role("cls", ("n_embd", "n_embd")),
    "cls_output": Role("cls.output", ("n_cls_out", "n_embd")),
    "rope_factors_long": Role("rope_factors_long", ("n_rot_half",)),
    "rope_factors_short": Role("rope_factors_short", ("n_rot_half",)),
    "attn_norm": Role("blk.{il}.attn_norm", ("n_embd",)),
    "attn_q": Role("blk.{il}.attn_q", ("n_q", "n_embd")),
    "attn_k": Role("blk.{il}.attn_k", ("n_kv", "n_embd")),
    "attn_v": Role("blk.{il}.attn_v", ("n_kv", "n_embd")),
    "attn_qkv": Role("blk.{il}.attn_qkv", ("n_qkv", "n_embd")),
    "attn_q_norm": Role("blk.{il}.attn_q_norm", ("q_norm",)),
    "attn_k_norm": Role("blk.{il}.attn_k_norm", ("k_norm",)),
    "attn_output": Role("blk.{il}.attn_output", ("n_embd", "n_q")),
    "post_attention_norm": Role("blk.{il}.post_attention_norm", ("n_embd",)),
    "ffn_norm": Role("blk.{il}.ffn_norm", ("n_embd",)),
    "ffn_gate": Role("blk.{il}.ffn_gate", ("n_ff", "n_embd")),
    "ffn_up": Role("blk.{il}.ffn_up", ("n_up", "n_embd")),
    "ffn_down": Role("blk.{il}.ffn_down", ("n_embd", "n_ff")),
    "post_ffw_norm": Role("blk.{il}.post_ffw_norm", ("n_embd",)),
    "attn_output_norm": Role("blk.{il}.attn_output_norm", ("n_embd",)),
    "layer_output_norm": Role("blk.{il}.layer_output_norm", ("n_embd",)),
    "attn_sinks": Role("blk.{il}.attn_sinks", ("n_head",)),
    # mixture of experts: the router, the experts, the shared expert and its gate
    "ffn_gate_inp": Role("blk.{il}.ffn_gate_inp", ("n_expert", "n_embd")),
    "ffn_gate_exps": Role("blk.{il}.ffn_gate_exps", ("n_expert", "n_ff_exp", "n_embd")),
    "ffn_up_exps": Role("blk.{il}.ffn_up_exps", ("n_expert", "n_ff_exp", "n_embd")),
    "ffn_down_exps": Role("blk.{il}.ffn_down_exps", ("n_expert", "n_embd", "n_ff_exp")),
    "ffn_gate_inp_shexp": Role("blk.{il}.ffn_gate_inp_shexp", ("n_embd",)),
    "ffn_gate_shexp": Role("blk.{il}.ffn_gate_shexp", ("n_ff_shexp", "n_embd")),
    "ffn_up_shexp": Role("blk.{il}.ffn_up_shexp", ("n_ff_shexp", "n_embd")),
    "ffn_down_shexp": Role("blk.{il}.ffn_down_shexp", ("n_embd", "n_ff_shexp")),
}


def name_of(family: Family, role: str, il: int | None = None, suffix: str = "weight") -> str:
    """The GGUF name of a role's tensor ("weight" or "bias") in layer il."""
    pattern = family.tensor_names.get(role, ROLES[role].name)
    return f"{pattern.format(il=il)}.{suffix}"


def attention_roles(family: Family) -> tuple[str, ...]:
    """The roles of a layer's attention block, as a file of the family stores them."""
    roles = ["attn_norm"] if family.pre_norms else []
    roles += ["attn_qkv"] if family.fused_qkv else ["attn_q", "attn_k", "attn_v"]
    if family.qk_norm != "none":
        roles += ["attn_q_norm", "attn_k_norm"]
    if family.attn_sinks:
        roles.append("attn_sinks")
    roles.append("attn_output")
    if family.post_norms:
        roles.append("post_attention_norm")
    if family.post_add_norms:
        roles.append("attn_output_norm")
    return tuple(roles)


EXPERT_ROLES = ("ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
SHARED_ROLES = ("ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp")


def ffn_roles(family: Family, experts: bool = False, shared: bool = False) -> tuple[str, ...]:
    """The roles of a layer's feed-forward block: dense, or (`experts`) a router and its
    experts, with a shared expert where `shared` (and its gate where the family has one)."""
    roles = ["ffn_norm"] if family.ffn_norm else []
    if experts:
        roles += EXPERT_ROLES
        if shared:
            roles += SHARED_ROLES
            if family.experts is not None and family.experts.shared == "gated":
                roles.append("ffn_gate_inp_shexp")
    else:
        gated = family.gated_ffn and not family.fused_gate_up
        roles += ["ffn_gate", "ffn_up"] if gated else ["ffn_up"]
        roles.append("ffn_down")
    if family.post_norms:
        roles.append("post_ffw_norm")
    if family.post_add_norms:
        roles.append("layer_output_norm")
    return tuple(roles)


def layer_roles(family: Family, experts: bool = False, shared: bool = False) -> tuple[str, ...]:
    return attention_roles(family) + ffn_roles(family, experts, shared)


@dataclass(frozen=True)
class Dims:
    """The numbers the shape symbols stand for, for one layer of one model."""

    n_vocab: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_rot: int
    fused_gate_up: bool
    qk_norm: str
    n_expert: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    n_pos: int = 0  # rows of position_embd (the trained context)
    n_token_types: int = 2
    n_cls_out: int = 1  # a reranker's classes (cls.output's rows)

    def resolve(self, shape: tuple[str, ...]) -> tuple[int, ...]:
        n_q, n_kv = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
        projection = self.qk_norm == "projection"
        values = {
            "n_vocab": self.n_vocab,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_q": n_q,
            "n_kv": n_kv,
            "n_qkv": n_q + 2 * n_kv,
            "q_norm": n_q if projection else self.head_dim,
            "k_norm": n_kv if projection else self.head_dim,
            "n_ff": self.n_ff,
            "n_up": 2 * self.n_ff if self.fused_gate_up else self.n_ff,
            "n_rot_half": self.n_rot // 2,
            "n_expert": self.n_expert,
            "n_ff_exp": self.n_ff_exp,
            "n_ff_shexp": self.n_ff_shexp,
            "n_pos": self.n_pos,
            "n_token_types": self.n_token_types,
            "n_cls_out": self.n_cls_out,
        }
        return tuple(values[symbol] for symbol in shape)
