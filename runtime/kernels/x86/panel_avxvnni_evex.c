/* panel_avxvnni_evex.c — panel_avxvnni.c built with -mavx512vnni
 * -mavx512vl: the EVEX encoding of the 256-bit vpdpbusd, for the avxvnni
 * level on CPUs with AVX-512 VNNI + VL and no AVX-VNNI (dispatch.c), so that
 * AVX-512 machines run and test the kernels that AVX-VNNI laptops run. */
#define LMQ_AVXVNNI_EVEX 1
#include "panel_avxvnni.c"
