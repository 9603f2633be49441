// winograd_rows.h — winograd's F(2, 7) row configuration (winograd_rows.cu), for winograd.cu's table.
#pragma once

#include <cstddef>

#include "conv_internal.h"

// The configuration's limits beyond the variant's (7x7 filters; grid, workspace and index ranges).
int winograd_rows_supports(const conv_problem* p);
// Bytes of workspace the transformed filters take.
size_t winograd_rows_workspace_bytes(const conv_problem* p);
int winograd_rows_run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                      void* stream);
