/* lmq_rt_tokenizer.h — section of lmq_runtime.h (to be written). */
#ifndef LMQ_RT_TOKENIZER_H
#define LMQ_RT_TOKENIZER_H
#include "lmq_format.h"
#endif
