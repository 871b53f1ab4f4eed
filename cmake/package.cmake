# The Debian packages, built by CPack from the install rules (scripts/package.sh):
#   wgnet         the programs, their manuals and service units, the docs (component `programs`)
#   libwgnet-dev  headers, static libraries and the CMake package (component `dev`)
# CPack rather than debian/ + dpkg-buildpackage: the install rules are the one list of
# what goes where, so `cmake --install` and the packages cannot drift apart.

# Per-package documentation Debian requires: copyright (ours, then lwIP's, which both
# packages carry compiled in) and a changelog, compressed as policy asks (gzip -9n).
set(deb_doc ${CMAKE_CURRENT_BINARY_DIR}/debian)
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE wgnet_license)
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/third_party/lwip/src/COPYING lwip_license)
string(REGEX REPLACE "\n$" "" wgnet_license "${wgnet_license}")
string(REGEX REPLACE "\n$" "" lwip_license "${lwip_license}")
string(REPLACE "\n\n" "\n.\n" wgnet_license_deb "${wgnet_license}")
string(REPLACE "\n" "\n " wgnet_license_deb "${wgnet_license_deb}")
string(REPLACE "\n\n" "\n.\n" lwip_license_deb "${lwip_license}")
string(REPLACE "\n" "\n " lwip_license_deb "${lwip_license_deb}")
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/copyright.in ${deb_doc}/copyright @ONLY)
string(TIMESTAMP deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg wgnet libwgnet-dev)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/changelog.in ${deb_doc}/${pkg}/changelog.Debian @ONLY)
endforeach()
find_program(GZIP gzip REQUIRED)
# A native package's Debian changelog is changelog.gz; CHANGELOG.md (what changed for
# users) goes beside it.
add_custom_command(OUTPUT ${deb_doc}/wgnet/changelog.gz ${deb_doc}/libwgnet-dev/changelog.gz
                          ${deb_doc}/wgnet/CHANGELOG.md.gz
  COMMAND ${GZIP} -9n -c ${deb_doc}/wgnet/changelog.Debian > ${deb_doc}/wgnet/changelog.gz
  COMMAND ${GZIP} -9n -c ${deb_doc}/libwgnet-dev/changelog.Debian > ${deb_doc}/libwgnet-dev/changelog.gz
  COMMAND ${GZIP} -9n -c ${CMAKE_CURRENT_SOURCE_DIR}/CHANGELOG.md > ${deb_doc}/wgnet/CHANGELOG.md.gz
  DEPENDS ${deb_doc}/wgnet/changelog.Debian ${deb_doc}/libwgnet-dev/changelog.Debian
          ${CMAKE_CURRENT_SOURCE_DIR}/CHANGELOG.md
  VERBATIM)
add_custom_target(debian_docs ALL DEPENDS ${deb_doc}/wgnet/changelog.gz ${deb_doc}/libwgnet-dev/changelog.gz
                                          ${deb_doc}/wgnet/CHANGELOG.md.gz)

set(doc_programs ${CMAKE_INSTALL_DATADIR}/doc/wgnet)
set(doc_dev ${CMAKE_INSTALL_DATADIR}/doc/libwgnet-dev)
install(FILES ${deb_doc}/copyright ${deb_doc}/wgnet/changelog.gz ${deb_doc}/wgnet/CHANGELOG.md.gz
        DESTINATION ${doc_programs} COMPONENT programs)
install(FILES ${deb_doc}/copyright ${deb_doc}/libwgnet-dev/changelog.gz DESTINATION ${doc_dev} COMPONENT dev)
file(GLOB user_docs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/README.md DESTINATION ${doc_programs} COMPONENT programs)
# docs/ beside README.md as in the source tree, so that its links resolve.
install(FILES ${user_docs} DESTINATION ${doc_programs}/docs COMPONENT programs)
# Sample configs, with placeholders for the keys.
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/examples/configs/wg0.conf
              ${CMAKE_CURRENT_SOURCE_DIR}/examples/configs/wg-netstack.conf
        DESTINATION ${doc_programs}/examples COMPONENT programs)

set(CPACK_PACKAGE_NAME wgnet)
set(CPACK_PACKAGE_VENDOR "wgnet developers")
set(CPACK_PACKAGE_CONTACT "wgnet developers <wgnet@example.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL programs dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)

set(CPACK_DEBIAN_PROGRAMS_PACKAGE_NAME wgnet)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_RECOMMENDS wireguard-tools)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/cmake/debian/postinst)
set(CPACK_DEBIAN_PROGRAMS_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_COMPONENT_PROGRAMS_DESCRIPTION "userspace WireGuard: SOCKS5/HTTP proxy and TUN daemon
wgnet is a userspace WireGuard implementation. This package holds its
programs: wg-netstack, a SOCKS5, HTTP and SNI proxy and port forwarder into
a WireGuard network with its own TCP/IP stack (no root, no TUN device),
which reads wg-quick and wireproxy configuration files; wg-tun, a TUN
daemon that wg(8) and wg-quick(8) drive as they drive wireguard-go; and
wg-run, which runs one program with its whole network through WireGuard,
without root. With their manual pages, a systemd unit
(wg-netstack@.service) and a drop-in that makes wg-quick use wg-tun.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libwgnet-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libsodium-dev, libb2-dev, libssl-dev, libboost1.81-dev, libfmt-dev, pkg-config")
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_COMPONENT_DEV_DESCRIPTION "userspace WireGuard library with an in-process TCP/IP stack
wgnet is a userspace WireGuard implementation. This package holds the
headers, static libraries and CMake package (find_package(wgnet)) to embed
it: open a tunnel from a wg-quick file and dial TCP or UDP through it from
your own program with Asio, or drive a kernel TUN device.")

include(CPack)
