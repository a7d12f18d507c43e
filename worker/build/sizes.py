"""The tiny sizes a shrunk config gets (hidden 64, 4 heads of 16, vocab 1024, ...) and the fields each applies to.

Data only: ``worker.build.tiny_config`` applies them field by field, ``worker.build.relations`` re-ties fields after.
"""

from __future__ import annotations

HIDDEN = 64
HEADS = 4
HEAD_DIM = 16
INTERMEDIATE = 128
EXPERT_INTERMEDIATE = 32
VOCAB = 1024
EXPERTS = 4
MAX_POSITIONS = 2048  # big enough for any test prompt; bounds learned position tables and causal-mask buffers
WINDOW = 16  # sliding windows shorter than a 32-token generation, so the windowed path really runs
SSM_STATE = 16
LORA_RANK = 32
SMALL_RANK = 8

HIDDEN_FIELDS = {
    "hidden_size", "d_model", "n_embd", "emb_dim", "embedding_dim", "lru_width", "attention_hidden_size",
    "word_embed_proj_dim", "hidden_size_global", "projector_input_dim", "projector_output_dim",
    "backbone_hidden_size", "router_hidden_size", "input_embedding_size", "output_embedding_size",
}
INTERMEDIATE_FIELDS = {
    "intermediate_size", "ffn_dim", "n_inner", "decoder_ffn_dim", "encoder_ffn_dim", "d_inner", "dff", "dim_ff",
    "ffn_hidden_size", "feed_forward_size", "intermediate_size_mlp", "dense_intermediate_size", "mlp_dim",
}
EXPERT_INTERMEDIATE_FIELDS = {
    "moe_intermediate_size", "expert_ffn_hidden_size", "shared_expert_intermediate_size",
    "shared_experts_intermediate_size", "moe_shared_expert_intermediate_size", "shared_intermediate_size",
}
HEAD_FIELDS = {
    "num_attention_heads", "n_head", "n_heads", "num_heads", "decoder_attention_heads", "encoder_attention_heads",
    "attention_heads", "swa_num_attention_heads", "num_decoder_attention_heads", "num_encoder_attention_heads",
}
KV_HEAD_FIELDS = {"num_key_value_heads", "num_kv_heads", "kv_n_heads", "multi_query_group_num",
                  "swa_num_key_value_heads", "num_query_groups"}
HEAD_DIM_FIELDS = {
    "head_dim", "d_head", "attention_head_dim", "kv_channels", "dim_head", "attention_head_size", "swa_head_dim",
    "linear_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_d_head", "mamba_head_dim",
    "mamba_headdim", "index_head_dim", "v_head_dim", "qk_nope_head_dim",
}
LINEAR_HEAD_FIELDS = {"linear_num_heads", "linear_num_key_heads", "linear_num_value_heads", "index_n_heads"}
CHANNEL_FIELDS = {"ext_pw_out_channel", "depthwise_separable_out_channel", "nemo_conv_channels"}
LORA_FIELDS = {"kv_lora_rank", "q_lora_rank", "o_lora_rank"}
SMALL_RANK_FIELDS = {"adapter_rank", "laurel_rank", "hc_lowrank", "gated_norm_rank", "time_step_rank",
                     "mamba_dt_rank", "d_rel"}
VOCAB_FIELDS = {"vocab_size", "decoder_vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size",
                "encoder_hash_byte_group_vocab", "shape_vocab_size", "pronunciation_vocab_size"}
POSITION_FIELDS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "context_length",
                   "max_target_positions", "model_max_length"}
EXPERT_COUNT_FIELDS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"}
TOPK_FIELDS = {"num_experts_per_tok", "moe_topk", "moe_top_k", "moe_k", "num_experts_per_token", "top_k"}
SHARED_EXPERT_FIELDS = {"n_shared_experts", "num_shared_experts", "moe_num_shared_experts"}
WINDOW_FIELDS = {"sliding_window", "attention_window_size", "local_attention", "sliding_window_size",
                 "attention_chunk_size", "local_attention_window_len", "window_size", "keep_window_size"}
SSM_STATE_FIELDS = {"state_size", "ssm_state_size", "mamba_d_state"}
CHUNK_FIELDS = {"chunk_size", "mamba_chunk_size"}
# Fields left None by some config classes' defaults that their models then need (hunyuan, ministral, dots1...).
FILL_NONE = {"head_dim": HEAD_DIM, "num_key_value_heads": HEADS, "num_experts_per_tok": 2, "n_routed_experts": EXPERTS,
             "n_shared_experts": 1}
ZERO_FIELDS = {"router_jitter_noise", "input_jitter_noise"}  # random routing noise breaks the reference check
