//! Kubernetes resource quantities (`500m`, `1Gi`, `1e3`, ...), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource.ParseQuantity` does, and turned into the `i64` Kueue
//! counts with: CPU as `MilliValue()`, every other resource as `Value()`.
//!
//! Invariants:
//! * a parsed value is exact down to 10⁻⁹ (a nano unit); anything finer is rounded up, away
//!   from zero, as Go rounds it, and the magnitude is capped at 2⁶³−1 whole units;
//! * sums are exact (in nano units), so `500m + 500m` of memory is 1, not 2; only the final
//!   conversion to `i64` rounds up and clamps to the `i64` range.

use std::fmt;

use crate::topology::resources::CPU;

/// Nano units per whole unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Nano units per milli unit.
const NANOS_PER_MILLI: i128 = 1_000_000;
/// Go caps every parsed quantity at 2⁶³−1 whole units (`maxAllowed`), here in nano units.
const CAP_NANOS: u128 = (i64::MAX as u128) * (NANOS_PER_UNIT as u128);

/// A parsed quantity: an exact signed amount in nano units (10⁻⁹).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuantityValue {
    nanos: i128,
}

impl QuantityValue {
    /// The zero quantity.
    pub const ZERO: QuantityValue = QuantityValue { nanos: 0 };

    /// A quantity of `nanos` nano units.
    pub fn from_nanos(nanos: i128) -> Self {
        QuantityValue { nanos }
    }

    /// The exact amount in nano units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// Go's `Value()`: whole units, rounded up (away from zero), clamped to `i64`.
    pub fn value(&self) -> i64 {
        scaled_up(self.nanos, NANOS_PER_UNIT)
    }

    /// Go's `MilliValue()`: milli units, rounded up (away from zero), clamped to `i64`.
    pub fn milli_value(&self) -> i64 {
        scaled_up(self.nanos, NANOS_PER_MILLI)
    }

    /// True for amounts below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// True for the zero amount.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The exact sum (saturating far beyond any value an `i64` can report).
    pub fn saturating_add(self, other: QuantityValue) -> QuantityValue {
        QuantityValue {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

/// `nanos / unit`, rounded away from zero, clamped to the `i64` range.
fn scaled_up(nanos: i128, unit: i128) -> i64 {
    let mut q = nanos / unit;
    if nanos % unit != 0 {
        q += nanos.signum();
    }
    i64::try_from(q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX })
}

/// Why a quantity string was rejected (Go's `ErrFormatWrong` / `ErrSuffix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityErrorKind {
    /// The string is empty.
    Empty,
    /// The string does not match `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`.
    Format,
    /// The suffix is none of the decimal-SI, binary-SI or exponent forms.
    Suffix,
}

/// A string that is not a Kubernetes quantity. Displays as `invalid quantity "8x"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}")]
pub struct QuantityError {
    /// The rejected text.
    pub input: String,
    /// Which rule it broke.
    pub kind: QuantityErrorKind,
}

/// Parses a quantity string exactly as Kubernetes does (`resource.ParseQuantity`).
///
/// Accepts an optional sign, a decimal number (`1`, `1.5`, `.5`, `1.`), and an optional
/// suffix: decimal SI (`n u m k M G T P E`), binary SI (`Ki Mi Gi Ti Pi Ei`) or a decimal
/// exponent (`e3`, `E-2`). Quirks kept from Go: a bare sign (`"+"`, `"-"`) is zero, and `E`
/// alone means exa (10¹⁸), not an exponent.
pub fn parse_quantity(s: &str) -> Result<QuantityValue, QuantityError> {
    let fail = |kind| QuantityError {
        input: s.to_string(),
        kind,
    };
    if s.is_empty() {
        return Err(fail(QuantityErrorKind::Empty));
    }
    let bytes = s.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut negative = false;
    match bytes[0] {
        b'-' => {
            negative = true;
            pos = 1;
        }
        b'+' => pos = 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos == end {
        // Only a sign and zeros (Go returns zero here, even for a bare sign).
        return Ok(QuantityValue::ZERO);
    }
    let num_start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &s[num_start..pos];
    let mut denom = "";
    if pos < end && bytes[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(fail(QuantityErrorKind::Format));
    }
    let (pow10, pow2) = match interpret_suffix(&s[suffix_start..]) {
        Some(Suffix::Decimal(exponent)) => (i64::from(exponent), 0),
        Some(Suffix::Binary(exponent)) => (0, exponent),
        None => return Err(fail(QuantityErrorKind::Suffix)),
    };

    // value = digits(num ++ denom) × 10^(pow10 − len(denom)) × 2^pow2; in nano units add 9.
    // `num` has no leading zero: only a fraction needs the two joined.
    let joined;
    let digits = if denom.is_empty() {
        num
    } else {
        joined = format!("{num}{denom}");
        joined.trim_start_matches('0')
    };
    if digits.is_empty() {
        return Ok(QuantityValue::ZERO);
    }
    let denom_len = i64::try_from(denom.len()).unwrap_or(i64::MAX);
    let nano_pow10 = pow10.saturating_add(9).saturating_sub(denom_len);
    let magnitude = i128::try_from(magnitude_nanos(digits, nano_pow10, pow2))
        .unwrap_or(i128::MAX)
        .min(CAP_NANOS as i128);
    Ok(QuantityValue {
        nanos: if negative { -magnitude } else { magnitude },
    })
}

/// A quantity suffix, as Go's `quantitySuffixer.interpret` reads it.
enum Suffix {
    /// Times 10^n (`m`, `k`, `e3`, ...).
    Decimal(i32),
    /// Times 2^n (`Ki`, `Mi`, ...).
    Binary(u32),
}

fn interpret_suffix(suffix: &str) -> Option<Suffix> {
    let decimal = match suffix {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        "Ki" => return Some(Suffix::Binary(10)),
        "Mi" => return Some(Suffix::Binary(20)),
        "Gi" => return Some(Suffix::Binary(30)),
        "Ti" => return Some(Suffix::Binary(40)),
        "Pi" => return Some(Suffix::Binary(50)),
        "Ei" => return Some(Suffix::Binary(60)),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .filter(|rest| !rest.is_empty())?;
            // Go parses an int64 and then converts it with `int32(parsed)`, which wraps.
            return exponent
                .parse::<i64>()
                .ok()
                .map(|e| Suffix::Decimal(e as i32));
        }
    };
    Some(Suffix::Decimal(decimal))
}

/// `digits × 10^pow10 × 2^pow2`, rounded up to an integer, saturating at [`CAP_NANOS`].
/// `digits` is non-empty, all ASCII digits, without leading zeros; `pow2` ≤ 60.
fn magnitude_nanos(digits: &str, pow10: i64, pow2: u32) -> u128 {
    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if pow10 >= 0 {
        // At least 10^(len − 1 + pow10): far above the cap once that exceeds 10^40.
        if len.saturating_add(pow10) > 40 {
            return CAP_NANOS;
        }
        let mut v = BigUint::from_decimal(digits);
        for _ in 0..pow10 {
            v.mul_add(10, 0);
        }
        v.mul_pow2(pow2);
        return v.to_u128().map_or(CAP_NANOS, |v| v.min(CAP_NANOS));
    }
    let shift = pow10.unsigned_abs();
    let len = len.unsigned_abs();
    // digits × 2^pow2 < 10^(len + 19), so dividing by 10^shift leaves a non-zero value below 1.
    if shift >= len.saturating_add(19) {
        return 1;
    }
    // At least 10^(len − shift − 1): above the cap.
    if len > shift.saturating_add(40) {
        return CAP_NANOS;
    }
    let mut v = BigUint::from_decimal(digits);
    v.mul_pow2(pow2);
    let mut inexact = false;
    let mut left = shift;
    while left > 0 {
        let step = left.min(9) as u32;
        inexact |= v.div_rem(10u32.pow(step)) != 0;
        left -= u64::from(step);
    }
    let whole = v.to_u128().map_or(CAP_NANOS, |v| v.min(CAP_NANOS));
    if inexact {
        whole.saturating_add(1).min(CAP_NANOS)
    } else {
        whole
    }
}

/// Just enough of an unsigned big integer for exact quantity scaling (little-endian limbs).
struct BigUint(Vec<u32>);

impl BigUint {
    fn from_decimal(digits: &str) -> Self {
        let mut v = BigUint(Vec::new());
        for chunk in digits.as_bytes().chunks(9) {
            let value = chunk
                .iter()
                .fold(0u32, |acc, d| acc * 10 + u32::from(d.wrapping_sub(b'0')));
            v.mul_add(10u32.pow(chunk.len() as u32), value);
        }
        v
    }

    /// `self = self × m + a`.
    fn mul_add(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow2(&mut self, mut exponent: u32) {
        while exponent > 0 {
            let step = exponent.min(31);
            self.mul_add(1 << step, 0);
            exponent -= step;
        }
    }

    /// `self = self / d`, returning the remainder.
    fn div_rem(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        rem as u32
    }

    fn to_u128(&self) -> Option<u128> {
        let significant = self.0.iter().rposition(|&l| l != 0).map_or(0, |i| i + 1);
        if significant > 4 {
            return None;
        }
        Some(
            self.0[..significant]
                .iter()
                .rev()
                .fold(0u128, |acc, &l| (acc << 32) | u128::from(l)),
        )
    }
}

impl fmt::Display for QuantityValue {
    /// Shows the exact decimal amount (`1.5`, `0.001`, `-2`), not the canonical k8s form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// The `i64` Kueue counts for `resource`: millicores for `cpu`, whole units otherwise.
pub fn resource_amount(resource: &str, value: QuantityValue) -> i64 {
    if resource == CPU {
        value.milli_value()
    } else {
        value.value()
    }
}

/// True when [`resource_amount`] gives `value` exactly (up to rounding), without clamping
/// it to the `i64` range.
pub fn fits_count(resource: &str, value: QuantityValue) -> bool {
    let unit = if resource == CPU {
        NANOS_PER_MILLI
    } else {
        NANOS_PER_UNIT
    };
    value.nanos.unsigned_abs() <= (i64::MAX as u128 - 1) * unit as u128
}

/// Parses `s` and converts it for `resource` (see [`resource_amount`]).
pub fn parse_resource_amount(resource: &str, s: &str) -> Result<i64, QuantityError> {
    parse_quantity(s).map(|v| resource_amount(resource, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i128 {
        parse_quantity(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .nanos()
    }

    fn kind(s: &str) -> QuantityErrorKind {
        parse_quantity(s).expect_err(s).kind
    }

    const G: i128 = 1_000_000_000;

    #[test]
    fn plain_numbers() {
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("1"), G);
        assert_eq!(nanos("42"), 42 * G);
        assert_eq!(nanos("007"), 7 * G);
        assert_eq!(nanos("+1"), G);
        assert_eq!(nanos("-1"), -G);
        assert_eq!(nanos("-0"), 0);
    }

    #[test]
    fn decimals() {
        assert_eq!(nanos("1.5"), 1_500_000_000);
        assert_eq!(nanos(".5"), 500_000_000);
        assert_eq!(nanos("1."), G);
        assert_eq!(nanos("0.001"), 1_000_000);
        assert_eq!(nanos("1.5k"), 1500 * G);
        assert_eq!(nanos("1.5Gi"), 1536 * 1024 * 1024 * G);
    }

    #[test]
    fn decimal_si_suffixes() {
        assert_eq!(nanos("500m"), 500_000_000);
        assert_eq!(nanos("1n"), 1);
        assert_eq!(nanos("3u"), 3_000);
        assert_eq!(nanos("2k"), 2_000 * G);
        assert_eq!(nanos("100M"), 100_000_000 * G);
        assert_eq!(nanos("1G"), G * G);
        assert_eq!(nanos("1T"), 1_000_000_000_000 * G);
        assert_eq!(nanos("1P"), 1_000_000_000_000_000 * G);
        // `E` alone is exa, not an exponent.
        assert_eq!(nanos("1E"), 1_000_000_000_000_000_000 * G);
    }

    #[test]
    fn binary_si_suffixes() {
        assert_eq!(nanos("1Ki"), 1024 * G);
        assert_eq!(nanos("1Mi"), (1 << 20) * G);
        assert_eq!(nanos("1Gi"), (1 << 30) * G);
        assert_eq!(nanos("1Ti"), (1 << 40) * G);
        assert_eq!(nanos("1Pi"), (1 << 50) * G);
        assert_eq!(nanos("1Ei"), (1 << 60) * G);
        assert_eq!(nanos("0.5Ki"), 512 * G);
    }

    #[test]
    fn exponents() {
        assert_eq!(nanos("1e3"), 1000 * G);
        assert_eq!(nanos("1E3"), 1000 * G);
        assert_eq!(nanos("1e+3"), 1000 * G);
        assert_eq!(nanos("1e-3"), 1_000_000);
        assert_eq!(nanos("12E-1"), 1_200_000_000);
        assert_eq!(nanos("1.5e2"), 150 * G);
    }

    #[test]
    fn finer_than_nano_rounds_up_away_from_zero() {
        assert_eq!(nanos("0.1n"), 1);
        assert_eq!(nanos("1e-30"), 1);
        assert_eq!(nanos("-0.1n"), -1);
        assert_eq!(nanos("1.0000000001"), G + 1);
        assert_eq!(nanos("1.0000000001Ki"), 1024 * G + 103);
    }

    #[test]
    fn huge_values_cap_at_max_int64_units() {
        let cap = i128::from(i64::MAX) * G;
        assert_eq!(nanos("1e100"), cap);
        assert_eq!(nanos("99999999999999999999999999999999999"), cap);
        assert_eq!(nanos("-1e100"), -cap);
        assert_eq!(nanos("16Ei"), cap);
        let q = parse_quantity("1e100").expect("parses");
        assert_eq!(q.value(), i64::MAX);
        assert_eq!(q.milli_value(), i64::MAX);
    }

    #[test]
    fn value_and_milli_value_round_up() {
        let q = |s: &str| parse_quantity(s).expect("parses");
        assert_eq!(q("500m").value(), 1);
        assert_eq!(q("500m").milli_value(), 500);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("0.1m").milli_value(), 1);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("2").milli_value(), 2000);
        assert_eq!(q("-500m").value(), -1);
        assert_eq!(q("0").value(), 0);
    }

    #[test]
    fn resource_amounts_use_kueue_units() {
        assert_eq!(parse_resource_amount("cpu", "500m"), Ok(500));
        assert_eq!(parse_resource_amount("cpu", "2"), Ok(2000));
        assert_eq!(parse_resource_amount("memory", "500m"), Ok(1));
        assert_eq!(parse_resource_amount("memory", "1Gi"), Ok(1 << 30));
        assert_eq!(parse_resource_amount("nvidia.com/gpu", "8"), Ok(8));
    }

    #[test]
    fn sums_are_exact() {
        let half = parse_quantity("500m").expect("parses");
        assert_eq!(half.saturating_add(half).value(), 1);
        assert_eq!(half.value() + half.value(), 2);
    }

    #[test]
    fn go_quirks() {
        // A bare sign parses as zero in Go.
        assert_eq!(nanos("+"), 0);
        assert_eq!(nanos("-"), 0);
        assert_eq!(nanos("."), 0);
        assert_eq!(nanos("0m"), 0);
    }

    #[test]
    fn rejects_malformed_strings() {
        assert_eq!(kind(""), QuantityErrorKind::Empty);
        assert_eq!(kind("1.2.3"), QuantityErrorKind::Format);
        assert_eq!(kind("abc"), QuantityErrorKind::Format);
        assert_eq!(kind("--1"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1Qi"), QuantityErrorKind::Format);
        assert_eq!(kind("8x"), QuantityErrorKind::Format);
        assert_eq!(kind(" 1"), QuantityErrorKind::Format);
        assert_eq!(kind("1 "), QuantityErrorKind::Format);
        assert_eq!(kind("1ki"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1mi"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1e"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1E+"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1e3.5"), QuantityErrorKind::Format);
        assert_eq!(kind("1e99999999999999999999"), QuantityErrorKind::Suffix);
        assert_eq!(kind("1Kim"), QuantityErrorKind::Suffix);
        assert_eq!(kind("１"), QuantityErrorKind::Format);
    }

    #[test]
    fn error_message_quotes_the_input() {
        let err = parse_quantity("8x").expect_err("invalid");
        assert_eq!(err.to_string(), r#"invalid quantity "8x""#);
    }

    #[test]
    fn display_is_exact() {
        let q = |s: &str| parse_quantity(s).expect("parses").to_string();
        assert_eq!(q("1500m"), "1.5");
        assert_eq!(q("-1m"), "-0.001");
        assert_eq!(q("2Ki"), "2048");
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics(s in "[-+0-9.eEinumkKMGTP ]{0,40}") {
            let _ = parse_quantity(&s).map(|q| (q.value(), q.milli_value()));
        }

        #[test]
        fn never_panics_on_anything(s in "\\PC{0,40}") {
            let _ = parse_quantity(&s);
        }

        #[test]
        fn integers_with_suffixes(n in 0i64..1_000_000, suffix in 0usize..6) {
            let (text, factor): (&str, i128) =
                [("", 1), ("k", 1_000), ("M", 1_000_000), ("Ki", 1024), ("Mi", 1 << 20), ("m", 0)]
                    [suffix];
            let q = parse_quantity(&format!("{n}{text}")).expect("valid");
            if factor == 0 {
                prop_assert_eq!(q.nanos(), i128::from(n) * 1_000_000);
            } else {
                prop_assert_eq!(q.value() as i128, i128::from(n) * factor);
            }
        }

        #[test]
        fn milli_decimals(whole in 0i64..10_000, frac in 0i64..1000) {
            let q = parse_quantity(&format!("{whole}.{frac:03}")).expect("valid");
            prop_assert_eq!(q.milli_value(), whole * 1000 + frac);
        }
    }
}
