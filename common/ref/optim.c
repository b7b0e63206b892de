/* optim.c - Adam and the warmup-then-decay learning rate of Section 5.3.
 *
 *   lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *
 * The two terms of the min cross at step == warmup: before it the rate grows
 * linearly (step * warmup^-1.5), after it it decays as 1/sqrt(step). So the
 * peak is factor * (d_model * warmup)^-0.5, reached exactly at step == warmup.
 */
#include "ref/optim.h"

#include <assert.h>
#include <math.h>

float lr_schedule(int step, int d_model, int warmup, float factor) {
    assert(step >= 1 && "lr_schedule: steps count from 1 (step 0 would divide by zero)");
    assert(d_model >= 1 && warmup >= 1);
    /* In double: step^-0.5 and warmup^-1.5 are tiny and we want the exact
     * crossing at step == warmup, where both terms equal warmup^-0.5. */
    double s = step, w = warmup;
    double decay = 1.0 / sqrt(s);
    double rise = s / (w * sqrt(w));
    return (float)(factor / sqrt((double)d_model) * (rise < decay ? rise : decay));
}

void adam_update(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step) {
    assert(step >= 1);
    /* m and v start at 0, so early on they are biased toward 0 by the
     * factors (1 - beta^t); dividing by them undoes that (Kingma & Ba 2015,
     * Sec. 2). With beta2 = 0.98 (the paper's choice, Sec. 5.3, instead of
     * Adam's usual 0.999) v forgets old gradients after ~50 steps. */
    double bc1 = 1.0 - pow(beta1, step);
    double bc2 = 1.0 - pow(beta2, step);
    /* m_hat = m / bc1, v_hat = v / bc2, step = lr * m_hat / (sqrt(v_hat) + eps),
     * written out literally so it reads like Algorithm 1 of Kingma & Ba.
     * Each element is independent: adam_step (fast/optim_fast.c) shares
     * them among the threads and vector lanes. */
    float a1 = (float)(1.0 / bc1), a2 = (float)(1.0 / bc2);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float m_hat = m[i] * a1;
        float v_hat = v[i] * a2;
        param[i] -= lr * m_hat / (sqrtf(v_hat) + eps);
    }
}

/* ---- the fused step: finite check + norm + Adam ------------------------------ */

double adam_step_ref(float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, int step) {
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (double)grad[i] * grad[i];
    if (!isfinite(sq)) return sq;                 /* refuse the step: nothing changes */
    adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, step);
    return sq;
}

/* ---- AdamW and the cosine schedule -------------------------------------------
 * Why the decay is decoupled (Loshchilov & Hutter 2019, Sec. 2): the older
 * way adds wd * p to the gradient (L2 regularisation). Adam then divides
 * that term by sqrt(v_hat) like the rest of the gradient, so a weight whose
 * gradients are large is hardly decayed, one whose gradients are small is
 * decayed hard, and the strength of the decay tangles with the adaptive
 * scaling. Decoupled, every decayed weight shrinks by the same factor
 * (1 - lr * wd) per step, whatever its gradient history, and wd can be
 * tuned apart from lr. The schedule multiplies both, as in PyTorch. */

float lr_warmup_cosine(int step, int warmup, int max_steps, float lr_max, float lr_min) {
    assert(step >= 1 && "lr_warmup_cosine: steps count from 1");
    assert(warmup >= 0 && max_steps > warmup);
    if (step <= warmup) return (float)((double)lr_max * step / warmup);
    if (step >= max_steps) return lr_min;
    /* in double: the midpoint must come out as (lr_max + lr_min) / 2 */
    double r = (double)(step - warmup) / (max_steps - warmup);
    return (float)(lr_min + 0.5 * (1.0 + cos(M_PI * r)) * ((double)lr_max - lr_min));
}

void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step) {
    assert(step >= 1);
    double bc1 = 1.0 - pow(beta1, step);
    double bc2 = 1.0 - pow(beta2, step);
    float a1 = (float)(1.0 / bc1), a2 = (float)(1.0 / bc2);
    /* p -= lr * wd * p as one factor, so that wd = 0 multiplies by exactly 1
     * and leaves adam_update's bits (PyTorch's AdamW: p.mul_(1 - lr * wd)) */
    float keep = (float)(1.0 - (double)lr * weight_decay);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float m_hat = m[i] * a1;
        float v_hat = v[i] * a2;
        float p = param[i] * keep;                    /* the decay, from the old p */
        param[i] = p - lr * m_hat / (sqrtf(v_hat) + eps);
    }
}

double adamw_step_ref(float *param, const float *grad, float *m, float *v, size_t n, const AdamwTensor *tensors,
                      int ntensors, float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    AdamwTensor all = {n, 1};
    if (!tensors) tensors = &all, ntensors = 1;
    size_t total = 0;
    for (int t = 0; t < ntensors; t++) total += tensors[t].n;
    assert(total == n && "adamw_step_ref: the tensors' sizes must add up to n");
    (void)total;
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (double)grad[i] * grad[i];
    if (!isfinite(sq)) return sq;                 /* refuse the step: nothing changes */
    size_t at = 0;
    for (int t = 0; t < ntensors; t++) {
        adamw_update(param + at, grad + at, m + at, v + at, tensors[t].n, lr, beta1, beta2, eps,
                     tensors[t].decay ? weight_decay : 0.0f, step);
        at += tensors[t].n;
    }
    return sq;
}
