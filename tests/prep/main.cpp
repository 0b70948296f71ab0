#define BOOST_TEST_MODULE prep
#include <boost/test/unit_test.hpp>
