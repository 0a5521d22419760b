/* lmq_rt_chat.h — section of lmq_runtime.h (to be written). */
#ifndef LMQ_RT_CHAT_H
#define LMQ_RT_CHAT_H
#include "lmq_format.h"
#endif
