# Debian packages (cpack -G DEB in the build folder; tools/package.sh builds and checks
# them): plexusd (the daemon, its unit and default config, plexusctl, plexus-bench),
# libplexus (the client library, its headers and pkg-config file, the NCCL-API library) and
# python3-plexus-torch (the torch.distributed backend). Dependencies come from dpkg-shlibdeps,
# so they name exactly the Debian libraries the binaries were linked against.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME plexus)
set(CPACK_PACKAGE_VENDOR "Plexus")
set(CPACK_PACKAGE_CONTACT "Plexus developers <plexus@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Everything, /etc included, goes under the staging folder: never onto this machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL plexusd libplexus)
if(PLEXUS_HAVE_TORCH)
  list(APPEND CPACK_COMPONENTS_ALL python3-plexus-torch)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_PLEXUSD_PACKAGE_NAME plexusd)
set(CPACK_COMPONENT_PLEXUSD_DESCRIPTION
    "Plexus per-node collective-communication service\n plexusd runs once per node, owns its NICs, transport connections and GPU copy\n engines, and runs collectives for the training processes on it; plexusctl\n inspects and steers it; plexus-bench measures it.")
set(CPACK_DEBIAN_PLEXUSD_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/packaging/plexusd/conffiles
    ${PROJECT_SOURCE_DIR}/tools/packaging/plexusd/postinst
    ${PROJECT_SOURCE_DIR}/tools/packaging/plexusd/prerm
    ${PROJECT_SOURCE_DIR}/tools/packaging/plexusd/postrm)
set(CPACK_DEBIAN_PLEXUSD_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_LIBPLEXUS_PACKAGE_NAME libplexus)
set(CPACK_COMPONENT_LIBPLEXUS_DESCRIPTION
    "Client library of the Plexus collective-communication service\n libplexus (C and C++ API, headers, pkg-config file plexus) and an NCCL-API\n libnccl.so.2 under /usr/lib/<arch>/plexus for unmodified NCCL programs.")
set(CPACK_DEBIAN_LIBPLEXUS_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/packaging/libplexus/triggers)

set(CPACK_DEBIAN_PYTHON3-PLEXUS-TORCH_PACKAGE_NAME python3-plexus-torch)
set(CPACK_COMPONENT_PYTHON3-PLEXUS-TORCH_DESCRIPTION
    "torch.distributed backend for the Plexus collective-communication service\n import plexus_torch registers backend \"plexus\".")
# torch's own libraries are not Debian shared-library packages dpkg-shlibdeps can name.
set(CPACK_DEBIAN_PYTHON3-PLEXUS-TORCH_PACKAGE_DEPENDS "python3-torch")
set(CPACK_DEBIAN_PYTHON3-PLEXUS-TORCH_PACKAGE_SECTION python)
include(CPack)
