#!/usr/bin/env python3
"""Writes tiny_train_step.json.gz: a small hand-designed Kineto trace in the
2024+ format (baseTimeNanoseconds, fractional relative ts, python_function,
pt_autograd thread) with two ProfilerSteps of a one-layer model, for the
chrome trace reader's tests. Events are in Kineto's file order (ops, then
[memory], then runtime/kernels, then metadata), so not time-sorted.

Run: python3 testdata/traces/gen_tiny_train_step.py (deterministic output).
"""
import gzip, io, json, os

PID, MAIN, AG = 4242, 100, 200
ops, memev, rest = [], [], []


def ts(us):  # Kineto writes "{us}.{ns:03}"
    return float(f"{us:.3f}")


def X(cat, name, tid, start, dur, args=None, pid=PID):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts(start), "dur": ts(dur)}
    if args is not None:
        e["args"] = args
    ops.append(e)


ta = {0: 1048576, -1: 0}  # pre-window allocated bytes per device
tr = {0: 2097152, -1: 0}


def M(tid, t, addr, nbytes, dev=0):
    ta[dev] += nbytes
    if dev == 0 and ta[dev] > tr[dev]:
        tr[dev] *= 2
    memev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID, "tid": tid,
                  "ts": ts(t), "args": {"Total Reserved": tr[dev], "Total Allocated": ta[dev], "Bytes": nbytes,
                                        "Device Id": dev if dev >= 0 else -1, "Device Type": 1 if dev >= 0 else 0,
                                        "Addr": addr, "finished": False, "Ev Idx": len(ops) + len(memev)}})


for k in (1, 2):
    S = 1000.0 * k
    act, tmp, loss, gout = 0x7F0000000000 + k * 0x100000, 0x7F0000010000 + k * 0x100000, 0x7F0000020000 + k * 0x100000, 0x7F0000030000 + k * 0x100000
    X("user_annotation", f"ProfilerStep#{k}", MAIN, S, 900)
    X("gpu_user_annotation", f"ProfilerStep#{k}", 7, S + 5, 880, pid=0)
    X("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", MAIN, S + 10, 10)
    X("python_function", "train.py(20): train_step", MAIN, S + 25, 855, {"Python id": 10 * k, "Python parent id": None})
    X("python_function", "nn.Module: Net_0", MAIN, S + 30, 270, {"Python id": 10 * k + 1, "Python parent id": 10 * k, "Python module id": 0})
    X("cpu_op", "aten::linear", MAIN, S + 40, 60, {"Input Dims": [[16, 64], [32, 64], [32]], "Sequence number": 1, "Fwd thread id": 0})
    X("cpu_op", "aten::addmm", MAIN, S + 50, 40)
    M(MAIN, S + 60, act, 4096)
    X("cpu_op", "aten::relu", MAIN, S + 110, 40)
    M(MAIN, S + 120, tmp, 1024)
    X("cpu_op", "aten::mse_loss", MAIN, S + 310, 20)
    M(MAIN, S + 320, loss, 512)
    X("cpu_op", "aten::empty", MAIN, S + 325, 1)
    M(MAIN, S + 325.5, 0x5600000000 + k, 64, dev=-1)
    M(MAIN, S + 326, 0x5600000000 + k, -64, dev=-1)
    X("python_function", "torch/_tensor.py(521): backward", MAIN, S + 340, 360)
    X("cpu_op", "autograd::engine::evaluate_function: MseLossBackward0", AG, S + 400, 50)
    M(AG, S + 410, gout, 512)
    M(AG, S + 440, loss, -512)
    X("cpu_op", "autograd::engine::evaluate_function: ReluBackward0", AG, S + 455, 45)
    M(AG, S + 460, tmp, -1024)
    X("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", AG, S + 505, 95)
    X("cpu_op", "AddmmBackward0", AG, S + 506, 90)
    X("cpu_op", "aten::mm", AG, S + 507, 10)
    if k == 1:
        M(AG, S + 510, 0x7F00000F0000, 8192)  # the weight's .grad, kept
    M(AG, S + 590, act, -4096)
    X("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", AG, S + 605, 15)
    X("cpu_op", "torch::autograd::AccumulateGrad", AG, S + 606, 5, {"Input Dims": [[32, 64]], "Input type": ["float"]})
    X("cpu_op", "torch::autograd::AccumulateGrad", AG, S + 612, 5, {"Input Dims": [[32]], "Input type": ["float"]})
    M(AG, S + 615, gout, -512)
    X("user_annotation", "Optimizer.step#SGD.step", MAIN, S + 750, 100)
    if k == 1:
        M(MAIN, S + 760, 0x7F00000E0000, 8192)  # momentum buffer, kept
    rest.append({"ph": "X", "cat": "kernel", "name": "void gemm<float>", "pid": 0, "tid": 7, "ts": ts(S + 60), "dur": 3.5,
                 "args": {"External id": k, "correlation": k, "stream": 7, "bytes": "2"}})
    rest.append({"ph": "s", "id": k, "pid": PID, "tid": MAIN, "ts": ts(S + 55), "cat": "ac2g", "name": "ac2g"})

memev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": PID, "tid": MAIN, "ts": ts(2950),
              "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1073741824, "Total Allocated": ta[0], "Total Reserved": tr[0]}})
meta = [
    {"name": "thread_name", "ph": "M", "ts": ts(1000), "pid": PID, "tid": MAIN, "args": {"name": f"thread {MAIN} (python3)"}},
    {"name": "thread_name", "ph": "M", "ts": ts(1000), "pid": PID, "tid": AG, "args": {"name": f"thread {AG} (python3)"}},
    {"name": "thread_name", "ph": "M", "ts": ts(1000), "pid": PID, "tid": AG, "args": {"name": f"thread {AG} (pt_autograd_0)"}},
    {"name": "thread_name", "ph": "M", "ts": ts(1000), "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
]
trace = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376, "computeMajor": 9}],
    "cupti_version": 24, "profile_memory": 1, "with_stack": 1, "record_shapes": 1,
    "metadata": {"API_TOKEN": "not-a-secret-but-never-echo-me"},
    "trace_id": "ABC", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000,
    "traceEvents": ops + memev + rest + meta,
    "traceName": "tiny_train_step.json",
}
buf = io.BytesIO()
with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as z:
    z.write(json.dumps(trace).encode())
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_train_step.json.gz")
open(out, "wb").write(buf.getvalue())
print(out, len(buf.getvalue()), "bytes,", len(trace["traceEvents"]), "events")
