/* lmq_runtime.h — the runtime module's public header: tokenizers, chat
 * templates, kernels and thread pool, the Llama model and sampler.
 * Each part is specified in its own section header included here; programs
 * include only this file. */
#ifndef LMQ_RUNTIME_H
#define LMQ_RUNTIME_H

#include "lmq_format.h"
#include "lmq_quant.h"

#include "lmq_rt_tokenizer.h"
#include "lmq_rt_chat.h"
#include "lmq_rt_json.h"
#include "lmq_rt_kernels.h"
#include "lmq_rt_model.h"

#endif
