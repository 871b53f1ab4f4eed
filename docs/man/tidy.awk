# Removes the paragraph macros that scdoc writes where man(7) wants none, so that
# `mandoc -T lint` is silent ("skipping paragraph macro"): a .P right after .SH or .SS,
# and a .P followed by .SH, .SS, another .P or the end. A .P that closes an indented
# block (.P then .RE) moves after the .RE, keeping the space between list entries.
# Hyphenation is turned off after .TH, which turns it back on in groff (scdoc's own .nh
# comes before it).
# Usage: scdoc < page.scd | awk -f tidy.awk > page.8
{ line[n++] = $0 }
END {
  for (i = 0; i + 1 < n; i++)
    if (line[i] == ".P" && line[i + 1] == ".RE") { line[i] = ".RE"; line[i + 1] = ".P" }
  prev = ""
  for (i = 0; i < n; i++) {
    if (line[i] == ".P") {
      next_line = i + 1 < n ? line[i + 1] : ".SH"
      if (prev ~ /^\.S[HS]( |$)/ || next_line == ".P" || next_line ~ /^\.S[HS]( |$)/) continue
    }
    print line[i]
    if (line[i] ~ /^\.TH /) print ".nh"
    prev = line[i]
  }
}
