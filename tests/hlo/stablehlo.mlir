module @jit_f attributes {mhlo.num_partitions = 8 : i32} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    return %arg0 : tensor<8xf32>
  }
}
