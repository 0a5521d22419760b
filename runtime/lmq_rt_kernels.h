/* lmq_rt_kernels.h — section of lmq_runtime.h (to be written). */
#ifndef LMQ_RT_KERNELS_H
#define LMQ_RT_KERNELS_H
#include "lmq_format.h"
#endif
