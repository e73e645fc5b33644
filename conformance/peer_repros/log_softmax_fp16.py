"""log_softmax in fp16 of values 50 apart: torch returns x - max - log(sum(exp(x - max)))
(-50 for the small one); the peer's network takes the log of a softmax that underflowed to
0 in fp16 and returns -inf."""

import torch
from _common import check


class LogSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


x = torch.tensor([[0.0, 50.0, 10.0]], dtype=torch.float16)
check(LogSoftmax(), [x], torch.log_softmax(x.double(), -1).half(), atol=0.05)
