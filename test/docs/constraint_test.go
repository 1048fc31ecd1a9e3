package docs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// constraint is what a doc's type cell states about a field, in the notation of api.md's
// field tables, items separated by ", ":
//
//	integer, 10..86400            a type, then bounds: N..M, N.., ≥ N or ≤ M (a string's
//	string, 3..63 characters      length, a list's items), and flags:
//	list, ≤ 32 items              immutable; pattern `REGEX`
//	enum `Retain` | `Delete`      an enum: its values, all of them
//	string, immutable
//
// Types: integer, string, boolean, object, map, list, quantity, duration, enum.
type constraint struct {
	typ       string
	enum      []string
	min, max  *int64
	pattern   string
	immutable bool
}

var (
	boundsRE  = regexp.MustCompile(`^(?:(\d+)\.\.(\d+)?|≥ ?(\d+)|≤ ?(\d+))(?: (?:characters|items))?$`)
	patternRE = regexp.MustCompile("^pattern `([^`]+)`$")
	typeNames = []string{"integer", "string", "boolean", "object", "map", "list", "quantity", "duration", "enum"}
)

// parseConstraint reads a type cell; an empty cell states nothing.
func parseConstraint(cell string) (*constraint, error) {
	if strings.TrimSpace(cell) == "" {
		return nil, nil
	}
	items := strings.Split(cell, ", ")
	c := &constraint{}
	c.typ, _, _ = strings.Cut(items[0], " ")
	if !slices.Contains(typeNames, c.typ) {
		return nil, fmt.Errorf("type cell %q: the type %q is none of %v", cell, c.typ, typeNames)
	}
	if c.typ == "enum" {
		c.enum = CodeSpans(items[0])
		if len(c.enum) == 0 {
			return nil, fmt.Errorf("type cell %q: an enum without values", cell)
		}
	}
	for _, item := range items[1:] {
		if err := c.parseItem(item); err != nil {
			return nil, fmt.Errorf("type cell %q: %w", cell, err)
		}
	}
	return c, nil
}

func (c *constraint) parseItem(item string) error {
	if item == "immutable" {
		c.immutable = true
		return nil
	}
	if m := patternRE.FindStringSubmatch(item); m != nil {
		c.pattern = m[1]
		return nil
	}
	m := boundsRE.FindStringSubmatch(item)
	if m == nil {
		return fmt.Errorf("%q is no bound (N..M, N.., ≥ N, ≤ M), immutable or pattern `...`", item)
	}
	c.min, c.max = number(firstOf(m[1], m[3])), number(firstOf(m[2], m[4]))
	return nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func number(s string) *int64 {
	if s == "" {
		return nil
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return &n
}

// check compares a stated constraint with a field of a CRD: the type, every bound both ways
// (a bound the CRD has and the doc leaves out is an error too), the enum's values, the
// pattern, and immutability both ways (the doc must say it of a field the CRD fixes, unless
// it is fixed as part of a fixed parent).
func (c *constraint) check(f field) []error {
	var errs []error
	if err := checkType(c.typ, f.schema); err != nil {
		errs = append(errs, err)
	}
	if c.typ == "enum" {
		if got := enumValues(f.schema); !slices.Equal(sortedCopy(c.enum), sortedCopy(got)) {
			errs = append(errs, fmt.Errorf("enum %v, the CRD's is %v", c.enum, got))
		}
	}
	errs = append(errs, checkBounds(c, f.schema)...)
	if c.pattern != "" && !hasPattern(f.schema, c.pattern) {
		errs = append(errs, fmt.Errorf("no pattern %q in the CRD (neither pattern nor a rule's matches())", c.pattern))
	}
	own, inherited := immutable(f)
	if c.immutable && !own && !inherited {
		errs = append(errs, fmt.Errorf("said immutable, but no rule of the CRD keeps it"))
	}
	if own && !inherited && !c.immutable {
		errs = append(errs, fmt.Errorf("the CRD keeps it immutable: say so (immutable)"))
	}
	return errs
}

func checkType(typ string, s *schema) error {
	ok := map[string]bool{
		"integer":  s.Type == "integer",
		"string":   s.Type == "string" && len(s.Enum) == 0,
		"duration": s.Type == "string",
		"boolean":  s.Type == "boolean",
		"object":   s.Type == "object" && s.AdditionalProperties == nil,
		"map":      s.Type == "object" && s.AdditionalProperties != nil,
		"list":     s.Type == "array",
		"quantity": s.XIntOrString && strings.Contains(s.Pattern, "[KMGTPE]i"),
		"enum":     len(s.Enum) > 0,
	}[typ]
	if !ok {
		return fmt.Errorf("stated %s, the CRD has type %q (enum %v, int-or-string %v)", typ, s.Type, enumValues(s), s.XIntOrString)
	}
	return nil
}

func enumValues(s *schema) []string {
	var out []string
	for _, v := range s.Enum {
		var x any
		if json.Unmarshal(v.Raw, &x) == nil {
			if str, ok := x.(string); ok && str == "" {
				out = append(out, `""`)
				continue
			}
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// checkBounds compares the stated bounds with the CRD's: a number's minimum and maximum, a
// string's length, a list's items.
func checkBounds(c *constraint, s *schema) []error {
	var lo, hi *int64
	switch s.Type {
	case "integer":
		lo, hi = toInt(s.Minimum), toInt(s.Maximum)
	case "string":
		lo, hi = s.MinLength, s.MaxLength
	case "array":
		lo, hi = s.MinItems, s.MaxItems
	}
	var errs []error
	if !sameBound(c.min, lo) {
		errs = append(errs, fmt.Errorf("lower bound %s, the CRD's is %s", show(c.min), show(lo)))
	}
	if !sameBound(c.max, hi) {
		errs = append(errs, fmt.Errorf("upper bound %s, the CRD's is %s", show(c.max), show(hi)))
	}
	return errs
}

func toInt(f *float64) *int64 {
	if f == nil {
		return nil
	}
	n := int64(*f)
	return &n
}

func sameBound(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(n *int64) string {
	if n == nil {
		return "none"
	}
	return strconv.FormatInt(*n, 10)
}

// hasPattern says whether the field's values must match re: its OpenAPI pattern, or a CEL
// rule on it that calls matches('re').
func hasPattern(s *schema, re string) bool {
	if s.Pattern == re {
		return true
	}
	for _, v := range s.XValidations {
		if strings.Contains(v.Rule, "matches('"+re+"')") {
			return true
		}
	}
	return false
}

// immutable says whether a CEL rule keeps the field from changing: own, a rule on the field
// (self == oldSelf), or a transition rule on a parent whose message names the field as
// immutable; inherited, a parent kept whole (self == oldSelf) or itself named immutable.
func immutable(f field) (own, inherited bool) {
	own = fixedByOwnRule(f.schema) || namedImmutable(f.ancestors, f.path)
	for i, a := range f.ancestors {
		if fixedByOwnRule(a) {
			inherited = true
		}
		if parent := ancestorPath(f.path, len(f.ancestors)-i); parent != "" && namedImmutable(f.ancestors[:i], parent) {
			inherited = true
		}
	}
	return own, inherited
}

// ancestorPath is path with up segments taken off its end; "" for the root.
func ancestorPath(path string, up int) string {
	segs := strings.Split(path, ".")
	if up >= len(segs) {
		return ""
	}
	return strings.Join(segs[:len(segs)-up], ".")
}

func fixedByOwnRule(s *schema) bool {
	for _, v := range s.XValidations {
		if strings.TrimSpace(v.Rule) == "self == oldSelf" {
			return true
		}
	}
	return false
}

// fixedWords are what a message says of a field a transition rule keeps.
var fixedWords = []string{"is immutable", "are immutable", "cannot be added, removed or changed"}

// namedImmutable says whether a transition rule (one that reads oldSelf) on one of schemas
// has a message naming path (spec.storage.medium) as immutable.
func namedImmutable(schemas []*schema, path string) bool {
	nameRE := regexp.MustCompile(`(^|[^.\w])` + regexp.QuoteMeta(path) + `($|[^.\w])`)
	for _, s := range schemas {
		for _, v := range s.XValidations {
			if strings.Contains(v.Rule, "oldSelf") && nameRE.MatchString(v.Message) && saysFixed(v.Message) {
				return true
			}
		}
	}
	return false
}

func saysFixed(msg string) bool {
	for _, w := range fixedWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
