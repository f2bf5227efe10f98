//! Expressions over merged values: HAVING conditions and select-list expressions that
//! contain aggregates (`NULLIF(MAX(amount), 0)`), computed after the shards' partial
//! aggregates are combined. Exact arithmetic only (integers and decimals); anything the
//! proxy cannot compute exactly is an error that names it, never an approximation.

use std::cmp::Ordering;

use super::decimal::Decimal;
use super::value::{Value, compare};

/// An expression over a merged group.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant (integers and decimals; NULL).
    Literal(Value),
    /// A combined aggregate, by its index in [`super::Grouping::aggregates`].
    Aggregate(usize),
    /// A group key's value, by its index in [`super::Grouping::keys`].
    Key(usize),
    /// A merged row's column, by its index in [`super::Grouping::outputs`].
    Output(usize),
    /// `-e`, `NOT e`.
    Unary(UnaryOp, Box<Expr>),
    /// `a op b`.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `e IS [NOT] NULL`.
    IsNull(Box<Expr>, bool),
    /// `e [NOT] BETWEEN low AND high`.
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// `e [NOT] IN (list)`.
    InList(Box<Expr>, Vec<Expr>, bool),
    /// A function of the few the merge computes.
    Call(Function, Vec<Expr>),
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// Arithmetic negation.
    Neg,
    /// Logical NOT.
    Not,
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `=`.
    Eq,
    /// `<>`, `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<=>` (NULL-safe equality).
    NullSafeEq,
    /// `AND`, `&&`.
    And,
    /// `OR`.
    Or,
}

/// Functions the merge computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `NULLIF(a, b)`.
    NullIf,
    /// `IFNULL(a, b)`.
    IfNull,
    /// `COALESCE(a, ...)`.
    Coalesce,
    /// `IF(cond, a, b)`.
    If,
    /// `ABS(a)`.
    Abs,
}

/// The values an expression reads.
pub trait Scope {
    /// A combined aggregate.
    fn aggregate(&self, i: usize) -> Result<Value, String>;
    /// A group key.
    fn key(&self, i: usize) -> Result<Value, String>;
    /// A merged column.
    fn output(&self, i: usize) -> Result<Value, String>;
}

/// A value as a condition, as MySQL reads it: NULL is unknown, any number but zero is
/// true (`HAVING SUM(amount)`, `HAVING -COUNT(*)`).
///
/// # Errors
/// A message naming the kind of value for dates and text, which the merge does not
/// convert to numbers.
pub(crate) fn truth(v: &Value) -> Result<Option<bool>, String> {
    Ok(match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::Decimal(d) => Some(!d.is_zero()),
        Value::Double(d) => Some(*d != 0.0),
        other => return Err(format!("a condition on {} values", kind(other))),
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Int(_) => "integer",
        Value::Decimal(_) => "decimal",
        Value::Double(_) => "floating-point",
        Value::Temporal(_) => "date and time",
        Value::Bytes(_) => "text",
    }
}

fn boolean(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => Value::Int(i128::from(b)),
    }
}

fn decimal(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal::from_i128(*i)),
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

/// Compares two values as MySQL compares numbers; text, floating-point and temporal
/// values are refused (their comparison depends on collations and conversions the merge
/// does not reproduce), except with themselves by type for temporals.
fn compare_exact(a: &Value, b: &Value) -> Result<Option<Ordering>, String> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => Ok(None),
        (Value::Int(_) | Value::Decimal(_), Value::Int(_) | Value::Decimal(_)) => {
            Ok(Some(compare(a, b)))
        }
        (Value::Temporal(_), Value::Temporal(_)) => Ok(Some(compare(a, b))),
        _ => Err(format!(
            "comparing {} with {} values after the merge",
            kind(a),
            kind(b)
        )),
    }
}

fn arithmetic(op: BinaryOp, a: &Value, b: &Value) -> Result<Value, String> {
    if matches!(a, Value::Null) || matches!(b, Value::Null) {
        return Ok(Value::Null);
    }
    let (Some(x), Some(y)) = (decimal(a), decimal(b)) else {
        return Err(format!(
            "arithmetic on {} and {} values after the merge",
            kind(a),
            kind(b)
        ));
    };
    let r = match op {
        BinaryOp::Add => x.checked_add(&y),
        BinaryOp::Sub => x.checked_sub(&y),
        _ => x.checked_mul(&y),
    }
    .ok_or_else(|| "a result beyond the merge's 38-digit arithmetic".to_owned())?;
    Ok(match (a, b) {
        (Value::Int(_), Value::Int(_)) if r.scale() == 0 => Value::Int(r.mantissa()),
        _ => Value::Decimal(r),
    })
}

impl Expr {
    /// The expression's value over one merged group. `Err` names what cannot be computed
    /// exactly (the statement fails with it).
    pub fn eval(&self, scope: &dyn Scope) -> Result<Value, String> {
        Ok(match self {
            Expr::Literal(v) => v.clone(),
            Expr::Aggregate(i) => scope.aggregate(*i)?,
            Expr::Key(i) => scope.key(*i)?,
            Expr::Output(i) => scope.output(*i)?,
            Expr::Unary(UnaryOp::Neg, e) => {
                arithmetic(BinaryOp::Sub, &Value::Int(0), &e.eval(scope)?)?
            }
            Expr::Unary(UnaryOp::Not, e) => boolean(truth(&e.eval(scope)?)?.map(|b| !b)),
            Expr::Binary(op, a, b) => self.binary(*op, a, b, scope)?,
            Expr::IsNull(e, negated) => {
                boolean(Some(matches!(e.eval(scope)?, Value::Null) != *negated))
            }
            Expr::Between(e, low, high, negated) => {
                let v = e.eval(scope)?;
                let ge = compare_exact(&v, &low.eval(scope)?)?.map(|o| o != Ordering::Less);
                let le = compare_exact(&v, &high.eval(scope)?)?.map(|o| o != Ordering::Greater);
                let within = match (ge, le) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                boolean(within.map(|w| w != *negated))
            }
            Expr::InList(e, list, negated) => {
                let v = e.eval(scope)?;
                let mut found = Some(false);
                for item in list {
                    match compare_exact(&v, &item.eval(scope)?)? {
                        Some(Ordering::Equal) => {
                            found = Some(true);
                            break;
                        }
                        None => found = None,
                        Some(_) => {}
                    }
                }
                boolean(found.map(|f| f != *negated))
            }
            Expr::Call(f, args) => call(*f, args, scope)?,
        })
    }

    fn binary(&self, op: BinaryOp, a: &Expr, b: &Expr, scope: &dyn Scope) -> Result<Value, String> {
        let x = a.eval(scope)?;
        match op {
            BinaryOp::And | BinaryOp::Or => {
                let p = truth(&x)?;
                // MySQL evaluates both sides; three-valued logic.
                let q = truth(&b.eval(scope)?)?;
                let r = if op == BinaryOp::And {
                    match (p, q) {
                        (Some(false), _) | (_, Some(false)) => Some(false),
                        (Some(true), Some(true)) => Some(true),
                        _ => None,
                    }
                } else {
                    match (p, q) {
                        (Some(true), _) | (_, Some(true)) => Some(true),
                        (Some(false), Some(false)) => Some(false),
                        _ => None,
                    }
                };
                return Ok(boolean(r));
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => {
                return arithmetic(op, &x, &b.eval(scope)?);
            }
            _ => {}
        }
        let y = b.eval(scope)?;
        if op == BinaryOp::NullSafeEq {
            return Ok(boolean(Some(match (&x, &y) {
                (Value::Null, Value::Null) => true,
                (Value::Null, _) | (_, Value::Null) => false,
                _ => compare_exact(&x, &y)? == Some(Ordering::Equal),
            })));
        }
        let ord = compare_exact(&x, &y)?;
        Ok(boolean(ord.map(|o| match op {
            BinaryOp::Eq => o == Ordering::Equal,
            BinaryOp::Ne => o != Ordering::Equal,
            BinaryOp::Lt => o == Ordering::Less,
            BinaryOp::Le => o != Ordering::Greater,
            BinaryOp::Gt => o == Ordering::Greater,
            _ => o != Ordering::Less,
        })))
    }
}

fn call(f: Function, args: &[Expr], scope: &dyn Scope) -> Result<Value, String> {
    let arg = |i: usize| -> Result<Value, String> {
        args.get(i)
            .ok_or_else(|| "a function with too few arguments".to_owned())?
            .eval(scope)
    };
    Ok(match f {
        Function::NullIf => {
            let a = arg(0)?;
            match compare_exact(&a, &arg(1)?)? {
                Some(Ordering::Equal) => Value::Null,
                _ => a,
            }
        }
        Function::IfNull => match arg(0)? {
            Value::Null => arg(1)?,
            v => v,
        },
        Function::Coalesce => {
            for i in 0..args.len() {
                let v = arg(i)?;
                if !matches!(v, Value::Null) {
                    return Ok(v);
                }
            }
            Value::Null
        }
        Function::If => {
            if truth(&arg(0)?)? == Some(true) {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        Function::Abs => match arg(0)? {
            Value::Int(i) => Value::Int(i.abs()),
            Value::Decimal(d) if d < Decimal::from_i128(0) => {
                Value::Decimal(d.checked_neg().ok_or("ABS beyond the merge's arithmetic")?)
            }
            v @ (Value::Decimal(_) | Value::Null) => v,
            other => return Err(format!("ABS of {} values after the merge", kind(&other))),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<Value>);

    impl Scope for Fixed {
        fn aggregate(&self, i: usize) -> Result<Value, String> {
            Ok(self.0[i].clone())
        }
        fn key(&self, _: usize) -> Result<Value, String> {
            Err("no keys".into())
        }
        fn output(&self, _: usize) -> Result<Value, String> {
            Err("no outputs".into())
        }
    }

    fn lit(i: i128) -> Box<Expr> {
        Box::new(Expr::Literal(Value::Int(i)))
    }

    #[test]
    fn having_conditions_use_three_valued_logic() {
        let s = Fixed(vec![Value::Int(5), Value::Null]);
        let gt = Expr::Binary(BinaryOp::Gt, Box::new(Expr::Aggregate(0)), lit(3));
        assert_eq!(gt.eval(&s).unwrap(), Value::Int(1));
        let null_cmp = Expr::Binary(BinaryOp::Gt, Box::new(Expr::Aggregate(1)), lit(3));
        assert_eq!(null_cmp.eval(&s).unwrap(), Value::Null);
        let or = Expr::Binary(BinaryOp::Or, Box::new(null_cmp.clone()), Box::new(gt));
        assert_eq!(or.eval(&s).unwrap(), Value::Int(1));
        let and = Expr::Binary(BinaryOp::And, Box::new(null_cmp), lit(0));
        assert_eq!(and.eval(&s).unwrap(), Value::Int(0));
    }

    #[test]
    fn nullif_and_arithmetic_are_exact() {
        let d = Decimal::parse(b"0.00").unwrap();
        let s = Fixed(vec![
            Value::Decimal(d),
            Value::Decimal(Decimal::parse(b"1.25").unwrap()),
        ]);
        let nullif = Expr::Call(
            Function::NullIf,
            vec![Expr::Aggregate(0), Expr::Literal(Value::Int(0))],
        );
        assert_eq!(nullif.eval(&s).unwrap(), Value::Null);
        let times = Expr::Binary(BinaryOp::Mul, Box::new(Expr::Aggregate(1)), lit(3));
        assert_eq!(
            times.eval(&s).unwrap(),
            Value::Decimal(Decimal::parse(b"3.75").unwrap())
        );
        let text = Fixed(vec![Value::Bytes(b"a".to_vec())]);
        let cmp = Expr::Binary(BinaryOp::Eq, Box::new(Expr::Aggregate(0)), lit(1));
        assert!(cmp.eval(&text).unwrap_err().contains("text"));
    }
}
