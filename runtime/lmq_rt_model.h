/* lmq_rt_model.h — section of lmq_runtime.h (to be written). */
#ifndef LMQ_RT_MODEL_H
#define LMQ_RT_MODEL_H
#include "lmq_format.h"
#endif
