//! Which of burn-cubecl-fusion's fusers burn-fusion offers `Ruda`'s operations to.

use core::fmt;
use std::sync::OnceLock;

use ruda_runtime::env::OFF_WORDS;

use crate::ops::RudaRuntime;

/// `RUDA_FUSERS`: the fusers of [`FuserSet`]. Unset or empty: [`FuserSet::default_for`] (Burn's
/// four, without the matmul fuser where ruda's products are native). `burn` (also `all`):
/// Burn's four. `none` (also `off`, `0`, `false`, `no`): no fuser, every operation runs alone.
/// Otherwise a list of `elementwise`, `matmul`, `reduce`, `reduce-broadcasted`, separated by
/// commas, `+` or spaces. A value that does not parse is reported once on stderr and the
/// default is used.
pub const ENV_FUSERS: &str = "RUDA_FUSERS";

/// A subset of the four fusers burn-cubecl gives burn-fusion for every CubeCL device.
///
/// burn-fusion offers each operation to every fuser of the list on its own thread, and copies
/// the list into each new block it explores, so a fuser that can never fire still costs that
/// thread time on every operation: where products are ruda's (cuBLAS on CUDA, one custom
/// operation each), no product reaches the matmul fuser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuserSet {
    /// Element-wise operations into one kernel.
    pub elementwise: bool,
    /// A product of Burn's with the element-wise work on its inputs and output.
    pub matmul: bool,
    /// A reduction with the element-wise work on its input and output.
    pub reduce: bool,
    /// Reductions and the element-wise work that broadcasts their results (a composed norm).
    pub reduce_broadcasted: bool,
}

/// The names [`ENV_FUSERS`] takes, in the order Burn lists the fusers.
pub const FUSER_NAMES: [&str; 4] = ["elementwise", "matmul", "reduce", "reduce-broadcasted"];

impl FuserSet {
    /// Burn's list: all four.
    pub const BURN: Self = Self {
        elementwise: true,
        matmul: true,
        reduce: true,
        reduce_broadcasted: true,
    };

    /// No fuser: burn-fusion runs every operation alone.
    pub const NONE: Self = Self {
        elementwise: false,
        matmul: false,
        reduce: false,
        reduce_broadcasted: false,
    };

    /// The set used when [`ENV_FUSERS`] is unset: Burn's list, without the matmul fuser when
    /// `native_products` (every product the fuser could take is then a custom operation, so
    /// dropping it changes no kernel).
    pub fn default_for(native_products: bool) -> Self {
        Self {
            matmul: !native_products,
            ..Self::BURN
        }
    }

    /// The set for a value of [`ENV_FUSERS`]: `Ok(None)` for an empty value (the default
    /// applies), an error naming the word that is not a fuser.
    pub fn parse(value: &str) -> Result<Option<Self>, String> {
        let value = value.trim().to_ascii_lowercase();
        if value.is_empty() {
            return Ok(None);
        }
        if value == "burn" || value == "all" {
            return Ok(Some(Self::BURN));
        }
        if value == "none" || OFF_WORDS.contains(&value.as_str()) {
            return Ok(Some(Self::NONE));
        }
        let mut set = Self::NONE;
        for word in value.split([',', '+', ' ']).filter(|word| !word.is_empty()) {
            match word {
                "elementwise" | "element-wise" => set.elementwise = true,
                "matmul" => set.matmul = true,
                "reduce" => set.reduce = true,
                "reduce-broadcasted" | "reduce_broadcasted" => set.reduce_broadcasted = true,
                other => {
                    return Err(format!(
                        "`{other}` is not a fuser: expected `burn`, `none`, or a list of {}",
                        FUSER_NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(Some(set))
    }

    /// The set for runtime `R`'s `device`: [`ENV_FUSERS`] where it is set and parses, else
    /// [`Self::default_for`] with the device's native products.
    pub fn for_device<R: RudaRuntime>(device: &R::CubeDevice) -> Self {
        from_env().unwrap_or_else(|| Self::default_for(R::has_native_matmul(&R::client(device))))
    }

    /// The names of the fusers in the set, in Burn's order.
    pub fn names(&self) -> Vec<&'static str> {
        let on = [
            self.elementwise,
            self.matmul,
            self.reduce,
            self.reduce_broadcasted,
        ];
        FUSER_NAMES
            .iter()
            .zip(on)
            .filter_map(|(name, on)| on.then_some(*name))
            .collect()
    }
}

impl fmt::Display for FuserSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// [`ENV_FUSERS`] as this process set it: read once, since burn-fusion asks for the list at
/// every new stream; a value that does not parse is reported once and ignored.
fn from_env() -> Option<FuserSet> {
    static SET: OnceLock<Option<FuserSet>> = OnceLock::new();
    *SET.get_or_init(|| {
        let value = std::env::var(ENV_FUSERS).ok()?;
        FuserSet::parse(&value).unwrap_or_else(|err| {
            eprintln!("ruda: {ENV_FUSERS}={value:?}: {err}; using the default fusers");
            None
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_drops_only_the_matmul_fuser_and_only_where_products_are_native() {
        assert_eq!(FuserSet::default_for(false), FuserSet::BURN);
        let native = FuserSet::default_for(true);
        assert!(!native.matmul);
        assert_eq!(
            native.names(),
            ["elementwise", "reduce", "reduce-broadcasted"]
        );
    }

    #[test]
    fn words_lists_and_empty_values_parse() {
        assert_eq!(FuserSet::parse("  "), Ok(None));
        assert_eq!(FuserSet::parse("Burn"), Ok(Some(FuserSet::BURN)));
        assert_eq!(FuserSet::parse("all"), Ok(Some(FuserSet::BURN)));
        for off in ["none", "off", "0", "false", "NO"] {
            assert_eq!(FuserSet::parse(off), Ok(Some(FuserSet::NONE)), "{off}");
        }
        let set = FuserSet::parse("elementwise, reduce+reduce_broadcasted")
            .unwrap()
            .unwrap();
        assert_eq!(set.names(), ["elementwise", "reduce", "reduce-broadcasted"]);
        assert_eq!(set.to_string(), "elementwise,reduce,reduce-broadcasted");
        assert_eq!(FuserSet::NONE.to_string(), "none");
    }

    #[test]
    fn an_unknown_fuser_is_named_in_the_error() {
        let err = FuserSet::parse("elementwise,softmax").unwrap_err();
        assert!(err.contains("`softmax` is not a fuser"), "{err}");
        assert!(err.contains("reduce-broadcasted"), "{err}");
    }
}
