import sys, torch, precred
cases = [("layer_norm","precise",torch.bfloat16,(8192,8192)),("layer_norm","fast",torch.bfloat16,(8192,8192)),
         ("layer_norm","precise",torch.float32,(8192,8192)),("layer_norm","fast",torch.float32,(8192,8192)),
         ("layer_norm","precise",torch.float32,(65536,1024)),("layer_norm","fast",torch.float32,(65536,1024)),
         ("layer_norm","precise",torch.float32,(262144,256)),("layer_norm","fast",torch.float32,(262144,256))]
for op, mode, dt, shape in cases:
    x = torch.randn(shape, device="cuda", dtype=dt)
    w = torch.randn(shape[-1], device="cuda", dtype=dt); b = torch.randn_like(w)
    f = getattr(precred, op)
    with torch.no_grad():
        for _ in range(2):
            f(x, (shape[-1],), w, b, mode=mode)
    torch.cuda.synchronize()
    print(op, mode, dt, shape, flush=True)
