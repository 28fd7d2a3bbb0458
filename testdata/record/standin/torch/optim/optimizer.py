"""torch.optim.optimizer: global step hooks, run after every step()."""

from .. import _standin

_global_optimizer_post_hooks = {}


class _Handle:
    def __init__(self, key):
        self.key = key

    def remove(self):
        _global_optimizer_post_hooks.pop(self.key, None)


def register_optimizer_step_post_hook(hook):
    _standin.log("torch.optim.optimizer.register_optimizer_step_post_hook", hook)
    key = len(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[key] = hook
    return _Handle(key)


class Optimizer:
    def step(self):
        _standin.log("Optimizer.step")
        for hook in _global_optimizer_post_hooks.values():  # as PyTorch: no removal while looping
            hook(self, (), {})
