/* torch_export.h - the weights in PyTorch's own layout: a safetensors file
 * whose tensors a wrapper around torch.nn.Transformer loads as they are,
 * with load_state_dict(strict=True) (tools/parity/torch_layout.py is that
 * wrapper, and the test that the logits agree).
 *
 * Why a second export: the project writes the paper's x W, so a Linear
 * weight is stored [in, out] and W^Q, W^K, W^V are three tensors
 * (io/grad_dump.h's model_export_safetensors). torch.nn.Linear stores
 * [out, in] and computes x W^T; torch.nn.MultiheadAttention packs the three
 * projections into one in_proj_weight [3 d_model, d_model] (rows 0..d-1
 * W^Q^T, then W^K^T, then W^V^T) and has biases the paper's attention does
 * not (written as zeros).
 *
 * The tensors, in the order of the wrapper's state_dict (d = d_model):
 *   embed.weight                     [vocab, d]    E, an nn.Embedding; the
 *                                                  wrapper scales it by sqrt(d)
 *   pos_embed.weight                 [max_len, d]  only with learned positions,
 *                                                  Table 3 (E); else the wrapper
 *                                                  adds Sec. 3.5's sinusoids
 *   transformer.encoder.layers.{i}.  self_attn.in_proj_weight [3d, d],
 *                                    self_attn.in_proj_bias [3d] (zeros),
 *                                    self_attn.out_proj.weight [d, d] (W^O^T),
 *                                    self_attn.out_proj.bias [d] (zeros),
 *                                    linear1.weight [d_ff, d] (W1^T), linear1.bias (b1),
 *                                    linear2.weight [d, d_ff] (W2^T), linear2.bias (b2),
 *                                    norm1.weight, norm1.bias, norm2.weight, norm2.bias
 *   transformer.encoder.norm.weight, .bias
 *   transformer.decoder.layers.{i}.  self_attn.* (masked), multihead_attn.*
 *                                    (cross-attention), linear1.*, linear2.*,
 *                                    norm1.* (after self_attn), norm2.* (after
 *                                    cross), norm3.* (after the FFN)
 *   transformer.decoder.norm.weight, .bias
 *   generator.weight                 [vocab, d]    the output projection
 *                                                  x E^T: E once more (Sec. 3.4)
 * The metadata holds what nn.Transformer's constructor needs (d_model, nhead,
 * num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
 * activation, batch_first, norm_first, layer_norm_eps), vocab, max_len,
 * pad_id, positions, embed_scale, and last_norm_eps with the two modules
 * it is for in last_norm_eps_goes_to (below).
 *
 * Post-LN (the paper) becomes norm_first=False; pre-LN norm_first=True,
 * whose stack-final norms are the model's own final LayerNorms (exact).
 * In post-LN nn.Transformer still applies a final norm after each stack,
 * which the paper's model lacks. The export puts the last layer's gain and
 * bias there and turns the last layer's own last norm into one that only
 * centres, which needs its eps (not a weight) set to last_norm_eps:
 *     t.encoder.layers[-1].norm2.eps = t.decoder.layers[-1].norm3.eps = 2**40
 * Then the model is the paper's to float rounding; without that line, its
 * last LayerNorm of each stack has eps 0 instead of 1e-5 (torch_export.c
 * works it out).
 */
#ifndef TORCH_EXPORT_H
#define TORCH_EXPORT_H

#include <stddef.h>
#include "model/model.h"

/* Longest tensor name written ("transformer.decoder.layers.255.multihead_attn.out_proj.weight") */
#define TORCH_NAME_MAX 80

/* 0 if a model of config c has a torch.nn.Transformer twin, else 2 with a
 * message: nn.MultiheadAttention has one head width, d_model / h, for
 * queries, keys and values, so h * d_k != d_model or d_v != d_k (Table 3
 * row B) cannot be exported. */
int torch_export_check(const Config *c, char *err, size_t errlen);

/* Writes m's weights (m->params, host memory) to path in the layout above.
 * Returns 0; 2 for a model torch_export_check refuses (nothing written);
 * 1 for an I/O failure or no memory (path untouched). Message in err. */
int model_export_torch(const Model *m, const char *path, char *err, size_t errlen);

#endif
