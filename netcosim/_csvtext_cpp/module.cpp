// netcosim._csvtext: number columns to CSV text in compiled loops (netcosim/outputs.py).
//
// A text column is a CSR of bytes: ``buf`` (uint8) and ``off`` (int64, n+1), row i being
// buf[off[i]:off[i+1]]. Floats are written exactly as Python's repr() writes them (shortest
// digits that read back to the same double, positional for 1e-4 <= |x| < 1e16, else
// scientific with a two-digit minimum exponent), so files stay byte-identical to the
// per-value repr() text they replace and every value round-trips through float(text).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using U8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

namespace {

// repr(x) of a finite or infinite double into out (at most 32 chars); NaN gives "".
int repr_double(double x, char* out) {
    if (std::isnan(x)) return 0;
    char* p = out;
    if (std::signbit(x)) { *p++ = '-'; x = -x; }
    if (std::isinf(x)) { std::memcpy(p, "inf", 3); return int(p - out) + 3; }
    // shortest round-trip digits, scientific: d[.ddd]e(+|-)XX
    char tmp[40];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, x, std::chars_format::scientific);
    char* end = r.ptr;
    char* e = static_cast<char*>(std::memchr(tmp, 'e', size_t(end - tmp)));
    char digits[24];
    int nd = 0;
    for (char* q = tmp; q < e; ++q)
        if (*q != '.') digits[nd++] = *q;
    int exp10 = 0;
    std::from_chars(e + (e[1] == '+' ? 2 : 1), end, exp10);
    const int decpt = exp10 + 1;  // position of the decimal point after the first digit
    if (decpt > -4 && decpt <= 16) {  // CPython's float_repr_style 'short', format 'r'
        if (decpt <= 0) {
            *p++ = '0'; *p++ = '.';
            for (int k = 0; k < -decpt; ++k) *p++ = '0';
            std::memcpy(p, digits, nd); p += nd;
        } else if (decpt >= nd) {
            std::memcpy(p, digits, nd); p += nd;
            for (int k = nd; k < decpt; ++k) *p++ = '0';
            *p++ = '.'; *p++ = '0';
        } else {
            std::memcpy(p, digits, decpt); p += decpt;
            *p++ = '.';
            std::memcpy(p, digits + decpt, nd - decpt); p += nd - decpt;
        }
    } else {
        *p++ = digits[0];
        if (nd > 1) { *p++ = '.'; std::memcpy(p, digits + 1, nd - 1); p += nd - 1; }
        *p++ = 'e';
        *p++ = exp10 < 0 ? '-' : '+';
        int a = exp10 < 0 ? -exp10 : exp10;
        if (a < 10) *p++ = '0';
        p = std::to_chars(p, p + 4, a).ptr;
    }
    return int(p - out);
}

template <class F>
py::tuple column(py::ssize_t n, size_t width, F&& write_one) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[size_t(n) * width + 1]);  // not zero-filled
    py::array_t<int64_t> off(n + 1);
    int64_t* o = off.mutable_data();
    size_t pos = 0;
    o[0] = 0;
    {
        py::gil_scoped_release nogil;
        for (py::ssize_t i = 0; i < n; ++i) {
            pos += size_t(write_one(i, reinterpret_cast<char*>(buf.get() + pos)));
            o[i + 1] = int64_t(pos);
        }
    }
    py::array_t<uint8_t> out{static_cast<py::ssize_t>(pos)};
    std::memcpy(out.mutable_data(), buf.get(), pos);
    return py::make_tuple(out, off);
}

py::tuple format_floats(F64 a) {
    const double* x = a.data();
    return column(a.size(), 32, [x](py::ssize_t i, char* p) { return repr_double(x[i], p); });
}

py::tuple format_ints(I64 a) {
    const int64_t* x = a.data();
    return column(a.size(), 21, [x](py::ssize_t i, char* p) {
        return int(std::to_chars(p, p + 21, x[i]).ptr - p);
    });
}

// Rows "c0,c1,...\n" from columns given as (buf, off) pairs with the same row count.
py::bytes join_rows(py::list cols) {
    const size_t k = cols.size();
    std::vector<U8> bufs;
    std::vector<I64> offs;
    py::ssize_t n = -1;
    size_t total = 0;
    for (auto c : cols) {
        auto t = c.cast<py::tuple>();
        bufs.push_back(t[0].cast<U8>());
        offs.push_back(t[1].cast<I64>());
        py::ssize_t m = offs.back().size() - 1;
        if (n >= 0 && m != n) throw std::invalid_argument("columns differ in length");
        n = m;
        total += size_t(bufs.back().size());
    }
    if (k == 0 || n <= 0) return py::bytes("");
    total += size_t(n) * k;  // k-1 commas and a newline per row
    std::string out(total, '\0');
    {
        py::gil_scoped_release nogil;
        char* p = out.data();
        for (py::ssize_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < k; ++j) {
                const int64_t* o = offs[j].data();
                const int64_t a = o[i], b = o[i + 1];
                std::memcpy(p, bufs[j].data() + a, size_t(b - a));
                p += b - a;
                *p++ = (j + 1 == k) ? '\n' : ',';
            }
        }
    }
    return py::bytes(out);
}

}  // namespace

PYBIND11_MODULE(_csvtext, m) {
    m.doc() = "CSV text of number columns (repr-identical floats), see netcosim/outputs.py";
    m.def("format_floats", &format_floats, "repr() text of every double as (buf, off); NaN -> ''");
    m.def("format_ints", &format_ints, "decimal text of every int64 as (buf, off)");
    m.def("join_rows", &join_rows, "CSV rows from a list of (buf, off) columns");
}
