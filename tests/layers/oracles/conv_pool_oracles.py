#!/usr/bin/env python3
"""Independent expected values for tests/layers/conv2d_test.cc and pool_test.cc (run once; the
numbers are pasted into the tests).

Plain Python (math only), written from the definitions of torch.nn.Conv2d, MaxPool2d,
AvgPool2d (floor mode) and AdaptiveAvgPool2d(1): a direct sum over every window tap, with no
im2col and nothing taken from gpipe's C++. Backward values come from central differences in
double precision. Inputs are small integer patterns times a power of two, so the C++ tests build
bit-identical floats from the same formula (Pattern in the tests).

    python3 tests/layers/oracles/conv_pool_oracles.py
"""

H = 1e-6  # double-precision central differences


def fmt(values):
    return "{" + ", ".join("%.9g" % v for v in values) + "}"


def pattern(n, mul, mod, offset, scale):
    """((i * mul) % mod - offset) * scale for i in [0, n): the tests' Pattern()."""
    return [((i * mul) % mod - offset) * scale for i in range(n)]


def fd_grad(f, xs, r):
    """d/dx of sum(f(xs) * r) by central differences."""
    out = []
    for i in range(len(xs)):
        plus = list(xs)
        minus = list(xs)
        plus[i] += H
        minus[i] -= H
        jp = sum(a * b for a, b in zip(f(plus), r))
        jm = sum(a * b for a, b in zip(f(minus), r))
        out.append((jp - jm) / (2 * H))
    return out


def out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv2d(x, w, b, n, c, h, wd, o, k, s, p, d, groups):
    """x [n, c, h, wd], w [o, c/groups, kh, kw], b [o] or None; returns y [n, o, ho, wo]."""
    kh, kw = k
    ho, wo = out_size(h, kh, s[0], p[0], d[0]), out_size(wd, kw, s[1], p[1], d[1])
    cg, og = c // groups, o // groups
    y = []
    for ni in range(n):
        for oc in range(o):
            g = oc // og
            for oh in range(ho):
                for ow in range(wo):
                    acc = b[oc] if b is not None else 0.0
                    for ci in range(cg):
                        cin = g * cg + ci
                        for i in range(kh):
                            for j in range(kw):
                                ih = oh * s[0] - p[0] + i * d[0]
                                iw = ow * s[1] - p[1] + j * d[1]
                                if 0 <= ih < h and 0 <= iw < wd:
                                    acc += (x[((ni * c + cin) * h + ih) * wd + iw] *
                                            w[((oc * cg + ci) * kh + i) * kw + j])
                    y.append(acc)
    return y


def max_pool2d(x, planes, h, wd, k, s, p, d):
    ho, wo = out_size(h, k[0], s[0], p[0], d[0]), out_size(wd, k[1], s[1], p[1], d[1])
    y = []
    for pl in range(planes):
        for oh in range(ho):
            for ow in range(wo):
                best = float("-inf")
                for i in range(k[0]):
                    for j in range(k[1]):
                        ih = oh * s[0] - p[0] + i * d[0]
                        iw = ow * s[1] - p[1] + j * d[1]
                        if 0 <= ih < h and 0 <= iw < wd:
                            best = max(best, x[(pl * h + ih) * wd + iw])
                y.append(best)
    return y


def avg_pool2d(x, planes, h, wd, k, s, p, count_include_pad):
    ho, wo = out_size(h, k[0], s[0], p[0], 1), out_size(wd, k[1], s[1], p[1], 1)
    y = []
    for pl in range(planes):
        for oh in range(ho):
            for ow in range(wo):
                total, inside = 0.0, 0
                for i in range(k[0]):
                    for j in range(k[1]):
                        ih = oh * s[0] - p[0] + i
                        iw = ow * s[1] - p[1] + j
                        if 0 <= ih < h and 0 <= iw < wd:
                            total += x[(pl * h + ih) * wd + iw]
                            inside += 1
                y.append(total / (k[0] * k[1] if count_include_pad else inside))
    return y


def global_avg_pool2d(x, planes, plane):
    return [sum(x[pl * plane:(pl + 1) * plane]) / plane for pl in range(planes)]


# ---- Conv2d A: x [1, 2, 4, 5], 3 output channels, kernel (3, 2), stride (2, 1), padding (1, 0),
# bias. Output [1, 3, 2, 4].
ax = pattern(40, 7, 11, 5, 0.25)
aw = pattern(36, 5, 13, 6, 0.125)
ab = [0.5, -0.25, 0.125]
ady = pattern(24, 3, 7, 3, 0.5)
conv_a = lambda x, w, b: conv2d(x, w, b, 1, 2, 4, 5, 3, (3, 2), (2, 1), (1, 0), (1, 1), 1)
print("conv A y  =", fmt(conv_a(ax, aw, ab)))
print("conv A dx =", fmt(fd_grad(lambda v: conv_a(v, aw, ab), ax, ady)))
print("conv A dW =", fmt(fd_grad(lambda v: conv_a(ax, v, ab), aw, ady)))
print("conv A db =", fmt(fd_grad(lambda v: conv_a(ax, aw, v), ab, ady)))

# ---- Conv2d B: x [2, 4, 4, 3], 2 output channels, kernel 2, stride (1, 2), padding 1,
# dilation 2, groups 2, no bias. Output [2, 2, 4, 2].
bx = pattern(96, 5, 17, 8, 0.25)
bw = pattern(16, 3, 7, 3, 0.25)
bdy = pattern(32, 5, 9, 4, 0.5)
conv_b = lambda x, w: conv2d(x, w, None, 2, 4, 4, 3, 2, (2, 2), (1, 2), (1, 1), (2, 2), 2)
print("conv B y  =", fmt(conv_b(bx, bw)))
print("conv B dx =", fmt(fd_grad(lambda v: conv_b(v, bw), bx, bdy)))
print("conv B dW =", fmt(fd_grad(lambda v: conv_b(bx, v), bw, bdy)))

# ---- MaxPool2d A: x [1, 2, 5, 5] (distinct values), kernel 3, stride 2, padding 1.
mx = pattern(50, 37, 50, 25, 0.25)
mdy = pattern(18, 5, 7, 3, 0.5)
max_a = lambda x: max_pool2d(x, 2, 5, 5, (3, 3), (2, 2), (1, 1), (1, 1))
print("max A y  =", fmt(max_a(mx)))
print("max A dx =", fmt(fd_grad(max_a, mx, mdy)))

# ---- MaxPool2d B: x [1, 1, 4, 4] (distinct values), kernel 2, stride 1, padding 1, dilation 2.
m2x = pattern(16, 5, 16, 8, 0.5)
m2dy = pattern(16, 3, 5, 2, 1.0)
max_b = lambda x: max_pool2d(x, 1, 4, 4, (2, 2), (1, 1), (1, 1), (2, 2))
print("max B y  =", fmt(max_b(m2x)))
print("max B dx =", fmt(fd_grad(max_b, m2x, m2dy)))

# ---- AvgPool2d: x [1, 1, 5, 5], kernel (3, 2), stride (2, 1), padding (1, 1). Output [1, 1, 3, 6].
vx = pattern(25, 7, 13, 6, 0.25)
vdy = pattern(18, 5, 7, 3, 0.5)
for include in (True, False):
    avg = lambda x: avg_pool2d(x, 1, 5, 5, (3, 2), (2, 1), (1, 1), include)
    print("avg include_pad=%s y  =" % include, fmt(avg(vx)))
    print("avg include_pad=%s dx =" % include, fmt(fd_grad(avg, vx, vdy)))

# ---- GlobalAvgPool2d: x [2, 3, 2, 2] -> [2, 3].
gx = pattern(24, 5, 11, 5, 0.25)
gdy = pattern(6, 1, 6, 2, 1.0)
gap = lambda x: global_avg_pool2d(x, 6, 4)
print("global y  =", fmt(gap(gx)))
print("global dx =", fmt(fd_grad(gap, gx, gdy)))
